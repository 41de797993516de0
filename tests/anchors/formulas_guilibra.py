"""GUI-Libra's RL formulas, transcribed from its EasyR1 fork (used by tests/anchors/test_guilibra.py).

Source: github.com/seooyxx/GUI-Libra (a fork of GUI-Libra/GUI-Libra; the official repository's snapshot is over the
fetch size limit and its EasyR1/ files are not in the search index), commit 14566cfa726ae1bee6d012a06512dd5e20b7006d,
file EasyR1/verl/trainer/core_algos.py. The released run `EasyR1/examples/gui_grpo.sh` sets
`algorithm.adv_estimator=grpo_weighted_positive_negative`, `weighted_posneg_base=0.5`, `weighted_posneg_coef=1.5`,
`kl_coef=0.001`, `clip_ratio_low=clip_ratio_high=0.2`, `loss_avg_mode=token`; `examples/config.yaml` sets
`use_kl_loss: true`, `kl_penalty: low_var_kl`; EasyR1's ActorConfig default `clip_ratio_dual` is 3.0.

Variable names and the order of operations are theirs. Removed: the `@torch.no_grad()` registration wrapper, metric
logging, and the `.float()` casts in `compute_kl` (the agreement tests run in float64).
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np
import torch


def compute_grpo_weighted_positive_negative(token_level_rewards, response_mask, index, eps=1e-6,
                                            weighted_posneg_base=0.5, weighted_posneg_coef=1.5):
    """`compute_grpo_outcome_advantage` registered as AdvantageEstimator.GRPO_WeightedPositiveNegative.

    index: one hashable uid per row (EasyR1 passes a numpy array of uid strings)."""
    scores = token_level_rewards.sum(dim=-1)
    id2score = defaultdict(list)
    id2mean, id2std = {}, {}

    bsz = scores.shape[0]
    for i in range(bsz):
        id2score[index[i]].append(scores[i])

    for idx in id2score:
        assert len(id2score[idx]) > 1, "GRPO needs rollout.n > 1."
        id2mean[idx] = torch.mean(torch.tensor(id2score[idx]))
        id2std[idx] = torch.std(torch.tensor(id2score[idx]))

    for i in range(bsz):
        scores[i] = (scores[i] - id2mean[index[i]]) / (id2std[index[i]] + eps)
        # apply different weights to positive and negative scores
        if scores[i] < 0:
            scores[i] = scores[i] * torch.clamp(weighted_posneg_base + weighted_posneg_coef * id2mean[index[i]],
                                                min=0.0, max=1.0)

    returns = scores.unsqueeze(-1) * response_mask
    return returns, returns


def compute_kl_low_var_kl(log_probs, ref_log_probs):
    """`compute_kl(..., kl_penalty="low_var_kl")`."""
    kl = (ref_log_probs - log_probs).clamp(-20.0, 20.0)
    kld = (kl.exp() - kl - 1).contiguous()
    return torch.clamp(kld, min=-10.0, max=10.0)


def average_loss_token(values, mask, eps=1e-8):
    """`average_loss(values, mask, mode="token")` = VF.masked_mean(values, mask, eps=eps)."""
    return (values * mask).sum() / (mask.sum() + eps)


def compute_policy_loss_default(old_log_probs, log_probs, advantages, response_mask, clip_ratio_low,
                                clip_ratio_high, clip_ratio_dual):
    """`compute_policy_loss(..., loss_type="default", loss_avg_mode="token", token_weight_mask=None)`."""
    negative_approx_kl = log_probs - old_log_probs
    log_importance_ratio = negative_approx_kl
    ratio = torch.exp(torch.clamp(log_importance_ratio, -20.0, 20.0))
    clipped_ratio = torch.exp(
        torch.clamp(log_importance_ratio, np.log(1.0 - clip_ratio_low), np.log(1.0 + clip_ratio_high))
    )
    pg_loss = -advantages * ratio  # -ratio * A
    pg_loss2 = -advantages * clipped_ratio  # -clip(ratio, 1-clip_low, 1+clip_high) * A
    pg_loss3 = -advantages * clip_ratio_dual  # -clip_dual * A

    clipped_pg_loss_higher = torch.max(pg_loss, pg_loss2)  # clip if pg_loss < pg_loss2
    clipped_pg_loss_lower = torch.min(clipped_pg_loss_higher, pg_loss3)  # clip if pg_loss > pg_loss3 and adv < 0
    final_pg_loss = torch.where(advantages < 0, clipped_pg_loss_lower, clipped_pg_loss_higher)
    return average_loss_token(final_pg_loss, response_mask)
