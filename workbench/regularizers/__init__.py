"""The `regularizer` slot: additive loss terms `fn(forward, batch, *, agg, denom, **hp) -> (loss, metrics)`
(KL to the reference in the loss, entropy bonus)."""
from workbench.regularizers import entropy, kl_penalty  # noqa: F401  (registration)
