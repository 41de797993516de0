"""Policy objectives: `fn(logp, old_logp, advantages, mask, *, agg, denom, **hp) -> (loss, metrics)`."""
from workbench.objectives import (  # noqa: F401  (registration)
    cispo, entropy_cov, minirl, mirror, multiturn, ppo, reinforce, sequence, soft, tis)
