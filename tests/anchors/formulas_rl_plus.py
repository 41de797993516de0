"""Transcriptions of RL-PLUS's advantage and loss.

Source: YihongDong/RL-PLUS @ eb4aa4d4e2d7ce206056f9d7740138bfc94fad8f
    rl_plus/verl/verl/recipe/rlplus_core_alg.py   `compute_grpo_outcome_advantage_split` L12-67,
                                                  `compute_token_on_off_policy_loss` L69-212
    rl_plus/verl/verl/trainer/ppo/core_algos.py   `compute_grpo_outcome_advantage` L110-158 (what the released script's
                                                  `adv_estimator=grpo` runs)
    rl_plus/verl/verl/utils/torch_functional.py   `masked_mean` L107-109 (no epsilon)

Function names, variable names (`omiga_prob`, `explosion_based_advantages`) and the order of operations are theirs. Left
out: the `print` calls (L119, L196) and nothing else; `verl_F.masked_mean` is `masked_mean` below. `index` is a list
of group ids (their uid array), `on_policy_mask` a [bs] bool tensor (their `~prefix_mask.any(-1)`, rlplus_trainer.py
L126), `prefix_mask` a [bs, L] bool tensor.
"""
from __future__ import annotations

from collections import defaultdict

import torch


def masked_mean(values, mask, axis=None):
    """torch_functional.py L107-109."""
    return (values * mask).sum(axis=axis) / mask.sum(axis=axis)


def compute_grpo_outcome_advantage(token_level_rewards, eos_mask, index, epsilon: float = 1e-6, use_std: bool = True):
    """core_algos.py L110-158: the group over every row of the prompt (returns `scores`, which is also `returns`)."""
    response_length = token_level_rewards.shape[-1]
    non_zero_mask = (token_level_rewards != 0)
    scores = (token_level_rewards * non_zero_mask).sum(dim=-1)

    id2score = defaultdict(list)
    id2mean = {}
    id2std = {}

    with torch.no_grad():
        bsz = scores.shape[0]
        for i in range(bsz):
            id2score[index[i]].append(scores[i])
        for idx in id2score:
            if len(id2score[idx]) == 1:
                id2mean[idx] = torch.tensor(0.0)
                id2std[idx] = torch.tensor(1.0)
            elif len(id2score[idx]) > 1:
                id2mean[idx] = torch.mean(torch.tensor(id2score[idx]))
                id2std[idx] = torch.std(torch.tensor([id2score[idx]]))
            else:
                raise ValueError(f"no score in prompt index: {idx}")
        for i in range(bsz):
            if use_std:
                scores[i] = (scores[i] - id2mean[index[i]]) / (id2std[index[i]] + epsilon)
            else:
                scores[i] = (scores[i] - id2mean[index[i]])
        scores = scores.unsqueeze(-1).tile([1, response_length]) * eos_mask

    return scores


def compute_grpo_outcome_advantage_split(token_level_rewards, eos_mask, index, on_policy_mask, epsilon: float = 1e-6,
                                         use_std: bool = True):
    """rlplus_core_alg.py L12-67: mean (and std) over the prompt's on-policy rows only, applied to every row."""
    response_length = token_level_rewards.shape[-1]
    non_zero_mask = (token_level_rewards != 0)
    scores = (token_level_rewards * non_zero_mask).sum(dim=-1)

    id2score = defaultdict(list)
    id2mean = {}
    id2std = {}

    with torch.no_grad():
        bsz = scores.shape[0]
        for i in range(bsz):
            # only include on-policy samples for mean and std calculation
            if on_policy_mask[i].item() is True:
                id2score[index[i]].append(scores[i])
        for idx in id2score:
            if len(id2score[idx]) == 1:
                id2mean[idx] = torch.tensor(0.0)
                id2std[idx] = torch.tensor(1.0)
            elif len(id2score[idx]) > 1:
                id2mean[idx] = torch.mean(torch.tensor(id2score[idx]))
                id2std[idx] = torch.std(torch.tensor([id2score[idx]]))
            else:
                raise ValueError(f"no score in prompt index: {idx}")
        # process std
        for idx in id2std:
            if id2std[idx].item() == 0:
                id2std[idx] = torch.tensor(1.0)
        for i in range(bsz):
            if use_std:
                scores[i] = (scores[i] - id2mean[index[i]]) / (id2std[index[i]] + epsilon)
            else:
                scores[i] = (scores[i] - id2mean[index[i]])
        scores = scores.unsqueeze(-1).tile([1, response_length]) * eos_mask

    return scores


def compute_token_on_off_policy_loss(old_log_prob, log_prob, advantages, eos_mask, cliprange, clip_upper_bound,
                                     prefix_mask, off_max_clip=None, off_min_clip=None, all_max_clip=None,
                                     off_policy_strategy="no_reshape", target_probs=None,
                                     loss_remove_token_mean=False, loss_remove_clip=False):
    """rlplus_core_alg.py L69-212, the returned dict in full."""
    negative_approx_kl = log_prob - old_log_prob
    ppo_kl = masked_mean(-negative_approx_kl, eos_mask)

    ratio = torch.exp(negative_approx_kl)  # [bsz, l]

    on_pg_losses = -advantages * ratio
    upper_bound = max(clip_upper_bound, 1.0 + cliprange)

    if loss_remove_clip is False:
        on_pg_losses2 = -advantages * torch.clamp(ratio, 1.0 - cliprange, upper_bound)
        on_pg_clipfrac = masked_mean(torch.gt(on_pg_losses2, on_pg_losses).float(), eos_mask)
        on_pg_losses = torch.max(on_pg_losses, on_pg_losses2)
        on_pg_loss = masked_mean(on_pg_losses, (~prefix_mask) * eos_mask)
    else:
        on_pg_loss = masked_mean(on_pg_losses, (~prefix_mask) * eos_mask)
        on_pg_clipfrac = torch.tensor(0.0)

    # compute off-policy loss
    if target_probs is None:
        off_ratio = torch.exp(log_prob)  # [bsz, l]
        if off_policy_strategy == "no_reshape":
            pass
        elif off_policy_strategy == "RL-PLUS":
            omiga_prob = 0.5 * (torch.exp(old_log_prob) + 1)
            off_ratio = 2 * torch.exp(log_prob) / (torch.exp(old_log_prob) + omiga_prob)
        else:
            raise ValueError(f"Invalid off_policy_strategy: {off_policy_strategy}")
    else:
        assert target_probs.shape == log_prob.shape
        off_ratio = torch.exp(log_prob) / (target_probs + 1e-6)
        off_ratio = off_ratio * prefix_mask

    # clip off-policy ratio
    if off_max_clip is not None:
        off_ratio = torch.clamp(off_ratio, max=off_max_clip)
        off_ratio_max_clip_frac = masked_mean((off_ratio == off_max_clip).float(), prefix_mask * eos_mask)
    else:
        off_ratio_max_clip_frac = torch.tensor(0.0)

    if off_min_clip is not None:
        off_ratio = torch.clamp(off_ratio, min=off_min_clip)
        off_ratio_min_clip_frac = masked_mean((off_ratio == off_min_clip).float(), prefix_mask * eos_mask)
    else:
        off_ratio_min_clip_frac = torch.tensor(0.0)

    off_ratio_mean = masked_mean(off_ratio, prefix_mask * eos_mask)
    if off_ratio_mean.isnan().any().item():
        off_ratio_mean = torch.tensor(0.0)

    if off_policy_strategy == "RL-PLUS":
        detached_log_prob = log_prob.detach()
        explosion_based_advantages = advantages * (1 - torch.exp(detached_log_prob)) ** (0.5)
        off_pg_losses = -off_ratio * explosion_based_advantages
    else:
        off_pg_losses = -off_ratio * advantages
    off_pg_loss = masked_mean(off_pg_losses, prefix_mask * eos_mask)
    if off_pg_loss.isnan().item() is True:
        off_pg_loss = torch.tensor(0.0)
    off_pg_clipfrac = torch.tensor(0.0)

    prefix_mask = prefix_mask.float()
    pg_losses = off_pg_losses * prefix_mask + on_pg_losses * (1 - prefix_mask)

    # log on/off probs
    off_policy_probs = torch.exp(log_prob)
    off_policy_prob = masked_mean(off_policy_probs, prefix_mask * eos_mask)
    if off_policy_prob.isnan().item() is True:
        off_policy_prob = torch.tensor(0.0)
    on_policy_probs = torch.exp(old_log_prob)
    on_policy_prob = masked_mean(on_policy_probs, (1.0 - prefix_mask) * eos_mask)
    if on_policy_prob.isnan().item() is True:
        on_policy_prob = torch.tensor(0.0)

    if all_max_clip is not None:
        p_on = torch.exp(log_prob)
        p_on_mask = (p_on <= all_max_clip).float()
        eos_mask = eos_mask * p_on_mask
        pg_losses = pg_losses * p_on_mask

    if loss_remove_token_mean is True:
        pg_loss = (pg_losses * eos_mask).sum() / eos_mask.shape[-1]
    else:
        pg_loss = masked_mean(pg_losses, eos_mask)

    return {
        "pg_loss": pg_loss,
        "off_pg_loss": off_pg_loss,
        "on_pg_loss": on_pg_loss,
        "off_pg_clipfrac": off_pg_clipfrac,
        "on_pg_clipfrac": on_pg_clipfrac,
        "ppo_kl": ppo_kl,
        "off_policy_prob": off_policy_prob,
        "on_policy_prob": on_policy_prob,
        "off_ratio_mean": off_ratio_mean,
        "off_ratio_max_clip_frac": off_ratio_max_clip_frac,
        "off_ratio_min_clip_frac": off_ratio_min_clip_frac,
    }
