"""VL-DAC's policy loss: token-level PPO clip (eps = 0.1) with the authors' ratio guard.

    r_t = exp(logp_t - old_t)
    l_t = -min(r_t A_t, clip(r_t, 1 - eps, 1 + eps) A_t)              ordinary PPO clip
    l_t = -clip(r_t, 1 - eps, 1 + eps) A_t    if any r_u > 10 in t's scope (the guard: only the clipped surrogate)

The guard (corl-team/VL-DAC @ 5da2783 `a2c_ppo_acktr/algo/ppo.py` `PPO.update`: `if torch.any(per_token_ratio > 10):
per_token_action_loss = -surr2`, after TRL's ratio threshold) drops the unclipped branch for a whole scope once
one token's ratio runs away: the loss is then bounded and flat outside [1 - eps, 1 + eps]. The code's minibatch is
one environment step (mini_batch_size 1), so its scope is one action: `guard="action"` (default) applies the rule
per (row, turn); `guard="minibatch"` to the whole minibatch; `guard=None` is plain PPO clip (`ppo-clip`).
Aggregation is the recipe's `agg` (the code takes a token mean inside each action, then averages actions).
"""
from __future__ import annotations

import torch

from workbench import ops, registry
from workbench.advantages.vl_dac import VL_DAC_TITLE
from workbench.objectives.ppo import CLIP_LOGS, check_inputs, clip_metrics, ppo_clip_per_token

GUARDS = ("action", "minibatch", None)


def guarded_scopes(r: torch.Tensor, mask: torch.Tensor, turn: torch.Tensor | None, guard, cap: float) -> torch.Tensor:
    """[B, T] bool: tokens whose scope (action or minibatch) holds a valid token with ratio > cap."""
    hot = (r > cap) & (mask > 0)
    if guard is None:
        return torch.zeros_like(hot)
    if guard == "minibatch":
        return hot.any().expand_as(hot) & (mask > 0)
    if turn is None:
        raise ValueError("vl-dac guard='action' needs `turn` (the multi-turn rollout fills it); use "
                         "guard='minibatch' for one-turn rows")
    S = int(turn.max().clamp(min=0)) + 1
    steps = turn.long().clamp(0, S - 1)
    hot_steps = torch.zeros(r.shape[0], S, dtype=r.dtype, device=r.device).scatter_add(1, steps, hot.to(r.dtype)) > 0
    return hot_steps.gather(1, steps) & (mask > 0)


VL_DAC_LOGS = {
    "clip/ratio_guard": ("VL-DAC: share of policy tokens whose action (or minibatch) holds a token ratio above 10, so "
                         "they train on the clipped surrogate alone.",
                         "Near 0. Persistently above a few percent: the policy moved far from the one that sampled "
                         "(lower lr or fewer epochs)."),
}


@registry.objective(
    "vl-dac", title=VL_DAC_TITLE,
    summary="Token-level PPO clip (eps 0.1); once any token ratio of an action exceeds 10, that action trains on "
            "the clipped surrogate alone (the authors' guard).",
    equation=r"\ell_t = -\min(r_t A_t, \mathrm{clip}(r_t, 1\pm\epsilon) A_t);\ "
             r"\max_{u \in a} r_u > 10 \Rightarrow \ell_t = -\mathrm{clip}(r_t, 1\pm\epsilon) A_t",
    reads=("turn",), logs={**CLIP_LOGS, **VL_DAC_LOGS}, choices={"guard": GUARDS})
def vl_dac_objective(logp, old_logp, advantages, mask, *, turn=None, agg="token-mean", denom=None, eps=0.1,
                     ratio_cap=10.0, guard="action"):
    """VL-DAC loss: `ppo_clip_per_token` with eps_low = eps_high = eps (0.1, `clip_param`), except on guarded scopes.
    Logs the PPO clip metrics and `clip/ratio_guard` (share of valid tokens under the guard)."""
    if guard not in GUARDS:
        raise ValueError(f"guard must be one of {GUARDS}, got {guard!r}")
    check_inputs(logp, old_logp, advantages, mask)
    per_token, r, _ = ppo_clip_per_token(logp, old_logp, advantages, eps_low=eps, eps_high=eps)
    guarded = guarded_scopes(r.detach(), mask, turn, guard, ratio_cap)
    clipped_only = -advantages * r.clamp(1 - eps, 1 + eps)
    per_token = torch.where(guarded, clipped_only, per_token)
    loss = ops.aggregate(per_token, mask, agg, denom)
    metrics = clip_metrics(r.detach(), advantages, mask, eps, eps)
    metrics["clip/ratio_guard"] = float(ops.masked_mean(guarded.to(mask.dtype), mask))
    return loss, metrics
