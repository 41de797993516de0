"""The critic's clipped value loss (PPO reference implementation), registered as the `value` slot's loss."""
from __future__ import annotations

import torch

from workbench import ops, registry
from workbench.objectives.ppo import PPO_TITLE


# What the critic losses log; each value loss declares the ones it logs from here.
VALUE_LOGS = {
    "value/loss": ("Clipped value loss of the critic (PPO only).",
                   "Falls, then plateaus (critic recipes only)."),
    "value/clipfrac": ("Fraction of tokens where the clipped value branch is larger (PPO only).",
                       "Small; large values mean the critic moves too far per step."),
    "value/mean": ("Mean predicted value V(s_t) (PPO only).",
                   "Tracks reward/mean when the critic learns."),
    "value/explained_var": ("1 - Var(R - V)/Var(R): how much of the return variance the critic explains.",
                            "Rises towards 1. Negative: the critic is worse than predicting a constant."),
}


def value_loss(values, old_values, returns, mask, *, agg="token-mean", denom=None, clip_eps=0.2):
    """values/old_values/returns [B, T]. clip_eps=None disables clipping (plain 1/2 (V - R)^2)."""
    unclipped = (values - returns) ** 2
    if clip_eps is None:
        per_token = 0.5 * unclipped
        clipfrac = torch.zeros(())
    else:
        v_clip = old_values + (values - old_values).clamp(-clip_eps, clip_eps)
        clipped = (v_clip - returns) ** 2
        per_token = 0.5 * torch.maximum(unclipped, clipped)
        clipfrac = ops.masked_mean((clipped > unclipped).to(mask.dtype), mask)
    loss = ops.aggregate(per_token, mask, agg, denom)
    with torch.no_grad():
        metrics = {
            "value/loss": float(loss),
            "value/clipfrac": float(clipfrac),
            "value/mean": float(ops.masked_mean(values, mask)),
            "value/explained_var": float(1 - ops.masked_var(returns - values, mask, False)
                                         / ops.masked_var(returns, mask, False).clamp(min=1e-8)),
        }
    return loss, metrics


@registry.value(
    "value-loss", title=PPO_TITLE,
    summary="Pessimistic max of the unclipped and clipped squared value errors, weighted by vf_coef.",
    equation=r"L_V = c_V\,\tfrac12\max\big((V-R)^2,\ (V_{old}+\mathrm{clip}(V-V_{old},\pm\epsilon_v)-R)^2\big)",
    reads=("returns", "value_mask", "old_values"), logs=VALUE_LOGS)
def clipped_value_loss(values, batch, *, agg="token-mean", denom=None, coef=0.1, clip_eps=0.2):
    """coef * `value_loss` of the head's values [B, T] on the advantage's targets (`returns`, `value_mask`);
    0 with no gradient signal when the minibatch has no target token (e.g. T-PPO's unfinished responses)."""
    if batch.value_mask.sum() == 0:
        return values.sum() * 0, {}
    loss, metrics = value_loss(values, batch.old_values, batch.returns, batch.value_mask, agg=agg, denom=denom,
                               clip_eps=clip_eps)
    return coef * loss, metrics
