"""Re-derivations of the F2 trust-region anchors (BAPO, GBPO, DOTS rollout replay), for tests/anchors/test_*.py.

Each function transcribes one reference function, keeping its variable names and order of operations; only the
config objects, distributed all-reduces, metric buffers and logging are removed (single process, config values
passed as arguments). Sources, read from the repositories at these commits:

    BAPO  WooooDyy/BAPO @ 7287044444d5d578529ea464b45f090a36e8da3a
          recipe/bapo/policy_loss.py: `_compute_effective_advantage`, `compute_policy_loss_bapo`
          verl/trainer/ppo/core_algos.py: `agg_loss` ("token-mean"); verl/utils/torch_functional.py: `masked_mean`
    GBPO  bounded-ratio-rl/bounded_ratio_rl @ 64ff1cdfb2bc891899b541abcbeb81ad2d5b14e4
          src/verl/trainer/ppo/core_algos.py: `compute_gbpo_outcome_advantage_and_target`,
          `compute_policy_loss_gbpo`, `agg_loss` ("token-mean"); src/verl/utils/torch_functional.py: `masked_mean`
    DOTS  ASTRAL-Group/data-efficient-llm-rl @ 59df9187b7786c0058316f886b77c13c8608c533
          rl_training/verl/verl/trainer/ppo/core_algos.py: `compute_policy_loss_temp`;
          rl_training/verl/verl/utils/torch_functional.py: `masked_mean` (no +1e-8 there)
"""
from __future__ import annotations

from collections import defaultdict

import torch


def verl_masked_mean(values, mask, axis=None):
    """BAPO's and bounded_ratio_rl's vendored verl: masked_sum / (mask.sum() + 1e-8)."""
    return (values * mask).sum(axis=axis) / (mask.sum(axis=axis) + 1e-8)


def agg_loss_token_mean(loss_mat, loss_mask):
    """`agg_loss(loss_mat, loss_mask, "token-mean")` of the vendored verl: verl_F.masked_mean."""
    return verl_masked_mean(loss_mat, loss_mask)


# ----------------------------------------------------------------------------------------------------------- BAPO


def bapo_compute_effective_advantage(ratio, advantages, response_mask, clip_low, clip_high, eps):
    """`_compute_effective_advantage` (without the torch.distributed all-reduce)."""
    clip_min = ratio.new_tensor(float(clip_low))
    clip_max = ratio.new_tensor(float(clip_high))

    ratio_pos = torch.minimum(ratio, clip_max)
    ratio_neg = torch.maximum(ratio, clip_min)
    effective_ratio = torch.where(advantages >= 0, ratio_pos, ratio_neg)

    effective_adv = effective_ratio * advantages * response_mask

    pos_contrib = effective_adv.clamp(min=0).sum()
    neg_contrib = (-effective_adv.clamp(max=0)).sum()

    if torch.all(neg_contrib <= 0):
        pos_neg_ratio = ratio.new_tensor(float("inf"))
    else:
        pos_neg_ratio = pos_contrib / (neg_contrib + ratio.new_tensor(eps))

    return effective_adv, pos_neg_ratio


def bapo_policy_loss(old_log_prob, log_prob, advantages, response_mask, *, ratio_lower_start=0.6,
                     ratio_lower_max=0.8, ratio_lower_step=0.05, ratio_upper_start=1.2, ratio_upper_max=2.0,
                     ratio_upper_step=0.05, adv_ratio_target=1.0, eps=1e-8, clip_ratio_c=3.0):
    """`compute_policy_loss_bapo` with loss_agg_mode "token-mean", rollout_is_weights None, the config's
    policy_loss fields as arguments. Returns (pg_loss, pg_clipfrac, ppo_kl, pg_clipfrac_lower, metrics) where
    metrics is the entry the reference appends to `_bapo_metrics_buffer`."""
    ratio_low_cur = ratio_lower_start
    ratio_high_cur = ratio_upper_start

    ratio_low_max = ratio_lower_max
    ratio_high_max = ratio_upper_max

    ratio_low_step = max(ratio_lower_step, 0.0)
    ratio_high_step = max(ratio_upper_step, 0.0)

    target_ratio = max(adv_ratio_target, 0.0)

    negative_approx_kl = torch.clamp(log_prob - old_log_prob, min=-20.0, max=20.0)
    ratio = torch.exp(negative_approx_kl)

    _, pos_neg_ratio = bapo_compute_effective_advantage(ratio=ratio, advantages=advantages,
                                                        response_mask=response_mask, clip_low=ratio_low_cur,
                                                        clip_high=ratio_high_cur, eps=eps)

    # adjust lower clip range first
    while pos_neg_ratio.item() < target_ratio and ratio_low_cur < ratio_low_max and ratio_low_step > 0:
        ratio_low_cur = min(ratio_low_cur + ratio_low_step, ratio_low_max)
        _, pos_neg_ratio = bapo_compute_effective_advantage(ratio=ratio, advantages=advantages,
                                                            response_mask=response_mask, clip_low=ratio_low_cur,
                                                            clip_high=ratio_high_cur, eps=eps)
        if pos_neg_ratio.item() >= target_ratio:
            break

    # if still unmet, increase upper bound
    while pos_neg_ratio.item() < target_ratio and ratio_high_cur < ratio_high_max and ratio_high_step > 0:
        ratio_high_cur = min(ratio_high_cur + ratio_high_step, ratio_high_max)
        _, pos_neg_ratio = bapo_compute_effective_advantage(ratio=ratio, advantages=advantages,
                                                            response_mask=response_mask, clip_low=ratio_low_cur,
                                                            clip_high=ratio_high_cur, eps=eps)
        if pos_neg_ratio.item() >= target_ratio:
            break

    metrics = {"clip_low": float(ratio_low_cur), "clip_high": float(ratio_high_cur),
               "pos_neg_ratio": float(pos_neg_ratio.item())}

    pg_losses1 = -advantages * ratio
    pg_losses2 = -advantages * torch.clamp(ratio, ratio_low_cur, ratio_high_cur)
    clip_pg_losses1 = torch.maximum(pg_losses1, pg_losses2)
    pg_clipfrac = verl_masked_mean(torch.gt(pg_losses2, pg_losses1).float(), response_mask)

    pg_losses3 = -advantages * clip_ratio_c
    clip_pg_losses2 = torch.min(pg_losses3, clip_pg_losses1)
    pg_clipfrac_lower = verl_masked_mean(
        torch.gt(clip_pg_losses1, pg_losses3) * (advantages < 0).float(), response_mask)

    pg_losses = torch.where(advantages < 0, clip_pg_losses2, clip_pg_losses1)

    pg_loss = agg_loss_token_mean(loss_mat=pg_losses, loss_mask=response_mask)

    ppo_kl = verl_masked_mean(-negative_approx_kl, response_mask)

    return pg_loss, pg_clipfrac, ppo_kl, pg_clipfrac_lower, metrics


# ----------------------------------------------------------------------------------------------------------- GBPO


def gbpo_outcome_advantage_and_target(token_level_rewards, response_mask, index, epsilon=1e-6,
                                      norm_adv_by_std_in_grpo=True, gbpo_temperature=1.0):
    """`compute_gbpo_outcome_advantage_and_target` (config keys as arguments). Returns (advantages, returns,
    target_adv)."""
    temperature = gbpo_temperature
    if temperature is None:
        temperature = 1.0
    temperature = float(temperature)
    if temperature <= 0:
        raise ValueError(f"gbpo_temperature must be > 0. Got {temperature}.")

    scores = token_level_rewards.sum(dim=-1)  # (bs,)

    id2score = defaultdict(list)
    id2mean = {}
    id2std = {}
    id2median = {}

    with torch.no_grad():
        bsz = scores.shape[0]
        for i in range(bsz):
            id2score[index[i]].append(scores[i])

        for idx, group_scores in id2score.items():
            if len(group_scores) == 1:
                id2mean[idx] = torch.tensor(0.0, device=scores.device, dtype=scores.dtype)
                id2std[idx] = torch.tensor(1.0, device=scores.device, dtype=scores.dtype)
                id2median[idx] = torch.tensor(0.0, device=scores.device, dtype=scores.dtype)
            elif len(group_scores) > 1:
                group_scores = torch.stack(group_scores)
                id2mean[idx] = torch.mean(group_scores)
                id2std[idx] = torch.std(group_scores)
                id2median[idx] = torch.quantile(group_scores, 0.5)
            else:
                raise ValueError(f"no score in prompt index: {idx}")

        target_scores = torch.empty_like(scores)
        for i in range(bsz):
            z = scores[i] - id2mean[index[i]]
            z_median = scores[i] - id2median[index[i]]
            if norm_adv_by_std_in_grpo:
                z = z / (id2std[index[i]] + epsilon)
                z_median = z_median / (id2std[index[i]] + epsilon)
            target_scores[i] = z_median / temperature
            scores[i] = z

        advantages = scores.unsqueeze(-1) * response_mask
        target_adv = target_scores.unsqueeze(-1) * response_mask

    return advantages, advantages, target_adv


def gbpo_policy_loss(old_log_prob, log_prob, advantages, response_mask, target_adv, *, clip_ratio=0.2,
                     clip_ratio_low=None, clip_ratio_high=None):
    """`compute_policy_loss_gbpo` with loss_agg_mode "token-mean". Returns (pg_loss, pg_clipfrac, ppo_kl,
    pg_clipfrac_lower)."""
    cliprange = clip_ratio
    cliprange_low = clip_ratio_low if clip_ratio_low is not None else cliprange
    cliprange_high = clip_ratio_high if clip_ratio_high is not None else cliprange

    negative_approx_kl = log_prob - old_log_prob
    negative_approx_kl = torch.clamp(negative_approx_kl, min=-20.0, max=20.0)
    ratio = torch.exp(negative_approx_kl)
    ppo_kl = verl_masked_mean(-negative_approx_kl, response_mask)

    target_adv = target_adv.detach()
    scale = torch.sigmoid(target_adv)
    target_ratio = 1.0 - cliprange_low + (cliprange_high + cliprange_low) * scale

    pg_losses = torch.abs((ratio - target_ratio) * advantages.detach())
    pg_loss = agg_loss_token_mean(loss_mat=pg_losses, loss_mask=response_mask)

    pg_clipfrac = verl_masked_mean(
        ((ratio > (1.0 + cliprange_high)) | (ratio < (1.0 - cliprange_low))).float(), response_mask)

    return pg_loss, pg_clipfrac, ppo_kl, torch.tensor(0.0, device=pg_loss.device)


# ----------------------------------------------------------------------------------------------------------- DOTS


def dots_masked_mean(values, mask, axis=None):
    """data-efficient-llm-rl's vendored verl `masked_mean`: no epsilon in the denominator."""
    return (values * mask).sum(axis=axis) / mask.sum(axis=axis)


def dots_policy_loss_temp(old_log_prob, log_prob, advantages, eos_mask, cliprange, temp_log_prob):
    """`compute_policy_loss_temp`: old_log_prob is the stored behaviour mu, temp_log_prob the recomputed pi_old.
    Returns (pg_loss, pg_clipfrac, ppo_kl)."""
    log_r_pi = log_prob - old_log_prob                      # log(π / μ)
    log_r_old = temp_log_prob - old_log_prob                 # log(π_old / μ)
    r_pi = torch.exp(log_r_pi)
    r_old = torch.exp(log_r_old)

    lower = r_old * (1.0 - cliprange)
    upper = r_old * (1.0 + cliprange)

    ppo_kl = dots_masked_mean(-log_r_pi, eos_mask)

    unclipped_loss = -advantages * r_pi
    clipped_loss = -advantages * torch.clamp(r_pi, lower, upper)

    pg_loss = dots_masked_mean(torch.max(unclipped_loss, clipped_loss), eos_mask)
    pg_clipfrac = dots_masked_mean(torch.gt(clipped_loss, unclipped_loss).float(), eos_mask)

    return pg_loss, pg_clipfrac, ppo_kl
