"""Multi-turn GRPO (WebAgent-R1): PPO-clip averaged over action tokens, then actions, then trajectories.

Observation (environment) tokens carry mask 0, so they never receive gradient. `turn` [B, T] gives the
action index of each token; without it a response is one action and the loss is GRPO's
seq-mean-token-mean.
"""
from __future__ import annotations

import torch

from workbench import ops, registry
from workbench.objectives.ppo import CLIP_LOGS, check_inputs, clip_metrics, ppo_clip_per_token


def action_mean(per_token: torch.Tensor, mask: torch.Tensor, turn: torch.Tensor | None,
                denom: ops.Denominators | None = None) -> torch.Tensor:
    """(1/B) sum_i (1/N_i) sum_j (1/|a_ij|) sum_{t in a_ij} l_t: N_i actions in row i, |a_ij| their tokens."""
    if turn is None:
        return ops.aggregate(per_token, mask, "seq-mean-token-mean", denom)
    if turn.shape != mask.shape:
        raise ValueError(f"turn has shape {tuple(turn.shape)} but mask has shape {tuple(mask.shape)}")
    ops.check_mask(per_token, mask, "per-token loss")
    per_token = ops.weighted(per_token, denom)  # the rollout correction, as ops.aggregate applies it
    B = mask.shape[0]
    n_turns = int(turn.max()) + 1
    key = (torch.arange(B, device=mask.device)[:, None] * n_turns + turn.long().clamp(min=0)).flatten()
    sums = torch.zeros(B * n_turns, dtype=per_token.dtype, device=mask.device).index_add(0, key,
                                                                                       (per_token * mask).flatten())
    counts = torch.zeros(B * n_turns, dtype=mask.dtype, device=mask.device).index_add(0, key, mask.flatten())
    present = counts > 0
    action_means = torch.where(present, sums / counts.clamp(min=1), torch.zeros_like(sums)).view(B, n_turns)
    per_row = action_means.sum(-1) / present.view(B, n_turns).sum(-1).clamp(min=1)
    rows = denom.num_seqs if denom is not None and denom.num_seqs is not None else (mask.sum(-1) > 0).sum()
    return per_row.sum() / rows


@registry.objective(
    "m-grpo", title="WebAgent-R1: Training Web Agents via End-to-End Multi-Turn Reinforcement Learning",
    summary="PPO-clip on action tokens only (observations masked), averaged per action, per trajectory, then "
            "over trajectories.",
    equation=r"L = \frac{1}{G}\sum_i \frac{1}{N_i}\sum_j \frac{1}{|a_{ij}|}\sum_{t\in a_{ij}} "
             r"-\min\big(r_t A_i, \mathrm{clip}(r_t, 1-\epsilon, 1+\epsilon) A_i\big)",
    reads=("turn",), logs=CLIP_LOGS)
def m_grpo(logp, old_logp, advantages, mask, *, turn=None, agg="seq-mean-token-mean", denom=None, eps_low=0.2,
           eps_high=0.2, logr_clamp=None):
    """Paper aggregation (`unverified`); the reference trainer's token-level loss is `ppo-clip` with `agg`.

    `agg` is ignored (the action mean is the point of the method) except that it must be the default.
    """
    if agg != "seq-mean-token-mean":
        raise ValueError("m-grpo aggregates per action (its own mode); leave agg='seq-mean-token-mean'")
    check_inputs(logp, old_logp, advantages, mask)
    per_token, r, _ = ppo_clip_per_token(logp, old_logp, advantages, eps_low=eps_low, eps_high=eps_high,
                                         logr_clamp=logr_clamp)
    loss = action_mean(per_token, mask, turn, denom)
    return loss, clip_metrics(r.detach(), advantages, mask, eps_low, eps_high)
