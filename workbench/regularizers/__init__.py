"""The `regularizer` slot: additive loss terms `fn(forward, batch, *, agg, denom, **hp) -> (loss, metrics)`
(KL to the reference in the loss, entropy bonus)."""
from workbench.regularizers import ahpo, entropy, epo, kl_penalty, llds, sac_temperature, safe  # noqa: F401  (registration)
