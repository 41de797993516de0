"""HAPO's token-level group average: every token of a group carries its response's reward.

    mu_g    = sum_i L_i R_i / sum_i L_i                       (token-weighted group mean, L_i = |y_i|)
    sigma_g = sqrt(sum_i L_i (R_i - mu_g)^2 / sum_i L_i)      (population std over the group's tokens)
    A_i     = (R_i - mu_g) / (sigma_g + eps)                  broadcast over y_i
    fallback: if any |A| >= 5 in the group, the group takes the `grpo` advantage instead

Long responses weigh more in the baseline, as they do in a token-mean loss. With equal lengths the token-level
statistics are the sequence ones: A equals `grpo` with the population std (unbiased=False).

Reference: starriver030515/HAPO `verl/trainer/ppo/core_algos.py::compute_hapo_outcome_advantage`. The entropy-
dependent halves of HAPO (redistribution, adaptive clipping) need the ratio and live in `objectives/hapo.py`.
"""
from __future__ import annotations

import torch

from workbench import registry
from workbench.advantages.base import broadcast, sequence_rewards
from workbench.advantages.group import check_group_sizes, group_index, group_mean, grpo

HAPO_TITLE = "From Uniform to Heterogeneous: Tailoring Policy Optimization to Every Token's Nature"


def token_level_stats(rewards: torch.Tensor, lengths: torch.Tensor, group: torch.Tensor):
    """Per-row token-weighted mean and population std of R over its group's tokens: ([B], [B])."""
    dense, counts = group_index(group)
    k = counts.shape[0]
    tokens = torch.zeros(k, dtype=rewards.dtype).index_add_(0, dense, lengths)             # [K] sum_i L_i
    mean = group_mean(rewards, dense, k, weights=lengths)[dense]                            # exact for equal R
    sq = torch.zeros(k, dtype=rewards.dtype).index_add_(0, dense, lengths * (rewards - mean) ** 2)
    std = (sq / tokens.clamp(min=1)).sqrt()[dense]
    return mean, std


@registry.advantage(
    "hapo", title=HAPO_TITLE,
    summary="Token-level group average: group mean and std over all tokens of the group (length-weighted), "
            "falling back to the GRPO advantage in groups where any |A| >= 5.",
    equation=r"A_i = \frac{R_i - \mu_g}{\sigma_g + \epsilon},\ \mu_g = \frac{\sum_i L_i R_i}{\sum_i L_i},\ "
             r"\sigma_g^2 = \frac{\sum_i L_i (R_i - \mu_g)^2}{\sum_i L_i};\ \ "
             r"\max_{i \in g}|A_i| \ge 5 \Rightarrow A_g = A_g^{\mathrm{GRPO}}")
def hapo(batch, *, eps=1e-6, fallback=5.0, allow_singletons=False, reference_bug=False):
    """Reads `rewards` (+ summed `token_rewards`), `group`, `mask` (L_i = policy tokens of row i).

    Defaults from the HAPO code: eps = 1e-6 (`compute_hapo_outcome_advantage(epsilon=1e-6)`, also the fallback
    GRPO's, whose std is Bessel-corrected as verl's), fallback threshold 5 (`torch.any(torch.abs(normed) >= 5)`).
    `allow_singletons`: a one-sample group is refused (False); its token-level A is 0 either way (its mean is its
    own reward); True gives the GRPO fallback 0 too, "keep" the code's verl rule (fallback A = R / (1 + eps), reached
    only through the padding check of reference_bug=True).

    reference_bug=False checks the fallback on the group's valid tokens only. The code scores R_i * mask before
    normalizing, so its padding positions hold (0 - mu)/(sigma + eps) and take part in the |A| >= 5 check: a group
    can fall back to GRPO because of tokens that do not exist (rewards far from 0 with a small spread).
    reference_bug=True reproduces that (padding = positions of the batch's width T outside a row's mask).
    """
    if not fallback > 0:
        raise ValueError(f"fallback must be > 0 (the |A| threshold above which a group takes GRPO), got {fallback}")
    if not eps > 0:
        raise ValueError(f"eps must be > 0 (a group with equal rewards divides by it), got {eps}")
    dense, sizes = group_index(batch.group)
    check_group_sizes(sizes[dense], "hapo", allow_singletons)
    rewards = sequence_rewards(batch)                          # [B] float64
    lengths = batch.mask.double().sum(-1)                      # [B] L_i
    mean, std = token_level_stats(rewards, lengths, batch.group)
    token_level = (rewards - mean) / (std + eps)               # [B]
    extreme = (token_level.abs() >= fallback) & (lengths > 0)
    if reference_bug:  # the code's padding positions hold (0 - mu) / (sigma + eps) and are checked too
        padded = (batch.mask <= 0).any(-1)
        extreme = extreme | (padded & ((-mean / (std + eps)).abs() >= fallback))
    group_falls_back = torch.zeros(sizes.shape[0], dtype=torch.long).index_add_(0, dense, extreme.long()) > 0
    token_level_adv = broadcast(token_level, batch.mask)                                    # [B, T]
    fallback_adv = grpo(batch, eps=eps, allow_singletons=allow_singletons).to(token_level_adv.dtype)
    return torch.where(group_falls_back[dense][:, None], fallback_adv, token_level_adv)
