"""The critic's clipped value loss (PPO reference implementation)."""
from __future__ import annotations

import torch

from workbench import ops, registry
from workbench.objectives.ppo import PPO_TITLE


@registry.objective(
    "value-loss", title=PPO_TITLE,
    summary="Pessimistic max of the unclipped and clipped squared value errors.",
    equation=r"L_V = \tfrac12\max\big((V-R)^2,\ (V_{old}+\mathrm{clip}(V-V_{old},\pm\epsilon_v)-R)^2\big)")
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
