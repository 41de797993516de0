"""Additive loss terms and reward penalties: KL to the reference, entropy bonus, token masks."""
from workbench.regularizers import entropy, kl_penalty, masks  # noqa: F401  (registration)
