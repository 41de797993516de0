"""The plain policy gradient: no ratio, no clip (REINFORCE; verl's `gpg` policy loss)."""
from __future__ import annotations

from workbench import ops, registry
from workbench.objectives.ppo import CLIP_LOGS, check_inputs, ratio


@registry.objective(
    "gpg", title="GPG: A Simple and Strong Reinforcement Learning Baseline for Model Reasoning",
    summary="REINFORCE: -A log pi per token, the on-policy (ratio = 1) gradient of every clipped objective.",
    equation=r"\ell_{i,t} = -A_{i,t}\,\log\pi_\theta(y_{i,t}\mid x, y_{i,<t})",
    logs={k: CLIP_LOGS[k] for k in ("ratio/mean", "ratio/max", "kl/k1_old", "clip/region")})
def reinforce(logp, old_logp, advantages, mask, *, agg="token-mean", denom=None):
    """Reads no ratio: after the first optimizer step on a batch it keeps pushing as if on-policy.

    `old_logp` is only used for the drift metrics (kl/k1_old, ratio stats).
    """
    check_inputs(logp, old_logp, advantages, mask)
    loss = ops.aggregate(-advantages * logp, mask, agg, denom)
    r = ratio(logp.detach(), old_logp)
    metrics = {"ratio/mean": float(ops.masked_mean(r, mask)), "ratio/max": float((r * mask).max()),
               "kl/k1_old": float(ops.masked_mean(old_logp - logp.detach(), mask)), "clip/region": 0.0}
    return loss, metrics
