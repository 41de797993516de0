"""Policy objectives: `fn(logp, old_logp, advantages, mask, *, agg, denom, **hp) -> (loss, metrics)`."""
from workbench.objectives import cispo, ppo, sequence, soft, tis, value  # noqa: F401  (registration)
