"""Policy objectives: `fn(logp, old_logp, advantages, mask, *, agg, denom, **hp) -> (loss, metrics)`."""
from workbench.objectives import ppo, value  # noqa: F401  (registration)
