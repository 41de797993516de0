"""Policy objectives: `fn(logp, old_logp, advantages, mask, *, agg, denom, **hp) -> (loss, metrics)`."""
from workbench.objectives import (  # noqa: F401  (registration)
    aepo_clip, bapo, capo, cispo, decoupled, dispo, entropy_cov, gbpo, hapo, hispo, minirl, mirror, multiturn,
    policy_shaping, ppo, r2vpo, reinforce, sequence, soft, tis, vspo)
