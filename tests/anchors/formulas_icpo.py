"""ICPO's loss and expert bonus, re-derived from the authors' code.

Source: Celine-hxy/ICPO @ 287ac4849e8f79cd44033eee638474e6c69e1eb2
    verl/recipe/icpo/utils/core_algos.py   `compute_icpo_policy_loss` (L197-300)
    verl/recipe/icpo/utils/reward_score.py `decay_by_step` (L72), `compute_score_icpo_bonus` (L80-106)

Variable names and the order of operations are theirs; `config` becomes keyword arguments (clip 0.2 / 0.2, c = 3),
verl's `masked_mean` and `agg_loss(..., "token-mean")` are written out, `hinted` is a bool tensor, and
`compute_score_icpo_bonus` takes `correct` instead of parsing a boxed answer.
"""
from __future__ import annotations

import numpy as np
import torch


def masked_mean(values, mask):
    return (values * mask).sum() / mask.sum()


def compute_icpo_policy_loss(old_log_prob, log_prob, advantages, response_mask, hinted, clip_ratio_low=0.2,
                             clip_ratio_high=0.2, clip_ratio_c=3.0):
    response_length = response_mask.shape[-1]
    hinted = hinted.unsqueeze(-1).expand(-1, response_length)
    negative_approx_kl = log_prob - old_log_prob
    negative_approx_kl = torch.clamp(negative_approx_kl, min=-20.0, max=20.0)
    ratio = torch.exp(negative_approx_kl)
    hinted_negative_approx_kl = log_prob
    hinted_negative_approx_kl = torch.clamp(hinted_negative_approx_kl, min=-20.0, max=20.0)
    hinted_ratio = torch.exp(hinted_negative_approx_kl)
    hinted_ratio = hinted_ratio / (hinted_ratio + 0.1)
    pg_losses1 = -advantages * ratio
    pg_losses2 = -advantages * torch.clamp(ratio, 1 - clip_ratio_low, 1 + clip_ratio_high)
    clip_pg_losses1 = torch.maximum(pg_losses1, pg_losses2)
    pg_losses3 = -advantages * clip_ratio_c
    clip_pg_losses2 = torch.min(pg_losses3, clip_pg_losses1)
    pg_losses = torch.where(advantages < 0, clip_pg_losses2, clip_pg_losses1)
    hinted_pg_losses = -advantages * hinted_ratio
    hinted = hinted.float()
    pg_losses = pg_losses * (1 - hinted) + hinted_pg_losses * hinted
    return masked_mean(pg_losses, response_mask)  # agg_loss(..., loss_agg_mode="token-mean")


def decay_by_step(step_t: int, method="exp", T=400, alpha=12):
    if method == "exp":
        return float(np.exp(-step_t / alpha))
    elif method == "linear":
        return max(0.0, 1 - step_t / T)
    elif method == "cosine":
        return 0.5 * (1 + np.cos(np.pi * step_t / T))


def compute_score_icpo_bonus(correct: bool, hinted: int, current_step: int, alpha=0.0115, beta=1) -> float:
    retval = 0.0
    step_t = current_step
    decay = decay_by_step(step_t, method="linear", T=400, alpha=alpha)
    if correct and hinted == 1:
        retval = 1.0 + beta * decay
    elif correct:
        retval = 1.0
    else:
        retval = 0
    return retval
