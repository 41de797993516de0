"""Transcriptions of AMPO's advantage, injection decision, comprehension score, teacher selection and loss.

Source: SII-Enigma/AMPO @ b88d365654e03b94d8316226a5a67e0f7b64048f
    ampo/verl/verl/adaptive_mix_src/mix_core_alg.py     `compute_grpo_outcome_advantage_split` L16-72,
                                                        `compute_token_on_seq_off_policy_loss` L304-593
                                                        (off_policy_loss_impl='seq', the script's)
    ampo/verl/verl/adaptive_mix_src/mix_dapo_trainer.py `MIXRayDAPOTrainer.mix_off_policy_rollout`: the per-prompt
                                                        injection decision L1374-1416, the forced teacher reward
                                                        L1594-1601, the kept targets L1547; `_sort_batch_by_scores`
                                                        L1753-1762; the prefix weighting of the advantage in `fit`
                                                        L1151-1159
    ampo/verl/verl/workers/reward_manager/prob.py       `ProbRewardManager.__init__` shaping L151-153, `__call__`
                                                        score L245-255, `compute_scoreB` L308-334
    ampo/verl/verl/trainer/ppo/core_algos.py            `compute_grpo_outcome_advantage` L261-324 (what the script's
                                                        `adv_estimator=grpo` runs), `agg_loss` L703-736
    ampo/verl/verl/utils/torch_functional.py            `masked_sum` L163-168, `masked_mean` L171-185

Function names, variable names and the order of operations are theirs. Left out: the `print` and `logger` calls and,
in the functions cut out of `mix_off_policy_rollout` and `fit`, the code around them; the names those excerpts take as
arguments are the ones the trainer has in scope there. `index` is a list of group ids (their uid array),
`on_policy_mask` a [bs] bool tensor (their `~prefix_mask.any(-1)`, mix_dapo_trainer.py L115), `prefix_mask` a [bs, L]
bool tensor. `config` of the loss is a dict with attribute access (their DictConfig).
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np
import torch


def masked_sum(values, mask, axis=None):
    """torch_functional.py L163-168."""
    valid_values = torch.where(mask.bool(), values, 0.0)
    return (valid_values * mask).sum(axis=axis)


def masked_mean(values, mask, axis=None):
    """torch_functional.py L171-185."""
    s = masked_sum(values, mask, axis)
    return s / (mask.sum(axis=axis) + 1e-8)


def agg_loss(loss_mat, loss_mask, loss_agg_mode):
    """core_algos.py L703-736."""
    if loss_agg_mode == "token-mean":
        loss = masked_mean(loss_mat, loss_mask)
    elif loss_agg_mode == "seq-mean-token-sum":
        seq_losses = torch.sum(loss_mat * loss_mask, dim=-1)  # token-sum
        loss = torch.mean(seq_losses)  # seq-mean
    elif loss_agg_mode == "seq-mean-token-mean":
        seq_losses = torch.sum(loss_mat * loss_mask, dim=-1) / torch.sum(loss_mask, dim=-1)  # token-mean
        loss = torch.mean(seq_losses)  # seq-mean
    elif loss_agg_mode == "seq-mean-token-sum-norm":
        seq_losses = torch.sum(loss_mat * loss_mask, dim=-1)
        loss = torch.sum(seq_losses) / loss_mask.shape[-1]
    else:
        raise ValueError(f"Invalid loss_agg_mode: {loss_agg_mode}")
    return loss


def compute_grpo_outcome_advantage(token_level_rewards, response_mask, index, epsilon: float = 1e-6,
                                   norm_adv_by_std_in_grpo: bool = True, config=None):
    """core_algos.py L261-324: the group over every row of the prompt (advantages, returns)."""
    scores = token_level_rewards.sum(dim=-1)

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
                scores_tensor = torch.stack(id2score[idx])
                id2mean[idx] = torch.mean(scores_tensor)
                id2std[idx] = torch.std(scores_tensor)
            else:
                raise ValueError(f"no score in prompt index: {idx}")
        for i in range(bsz):
            if norm_adv_by_std_in_grpo:
                scores[i] = (scores[i] - id2mean[index[i]]) / (id2std[index[i]] + epsilon)
            else:
                scores[i] = scores[i] - id2mean[index[i]]
        scores = scores.unsqueeze(-1) * response_mask

    return scores, scores


def compute_grpo_outcome_advantage_split(token_level_rewards, eos_mask, index, on_policy_mask, epsilon: float = 1e-6,
                                         norm_adv_by_std_in_grpo: bool = True):
    """mix_core_alg.py L16-72: mean and std over the prompt's on-policy rows only (std 0 -> 1), applied to every
    row (advantages, returns)."""
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
            if norm_adv_by_std_in_grpo:
                scores[i] = (scores[i] - id2mean[index[i]]) / (id2std[index[i]] + epsilon)
            else:
                scores[i] = (scores[i] - id2mean[index[i]])
        scores = scores.unsqueeze(-1).tile([1, response_length]) * eos_mask

    return scores, scores


def prefix_weighted_advantages(advantages, prefix_mask, prefix_reward_weight_alpha, prefix_reward_weight_beta):
    """mix_dapo_trainer.py L1151-1159 (in `fit`): alpha on prefix (teacher) tokens, beta on the others."""
    assert prefix_mask.shape == advantages.shape

    alpha_weight = prefix_mask.float() * prefix_reward_weight_alpha
    beta_weight = (~prefix_mask).float() * prefix_reward_weight_beta
    prefix_weight = alpha_weight + beta_weight
    return prefix_weight * advantages


def injection_decision(reward_tensor, start_idx, n, format_coefficient, injection_strategy="adaptive"):
    """mix_dapo_trainer.py L1374-1416, one prompt: its rows start_idx .. start_idx + n - 1 of `reward_tensor` [bs, L]
    (their token_level_scores). Returns (needs_injection, correct_positions, incorrect_positions)."""
    scores = {}
    correct_positions = []
    incorrect_positions = []

    for i_ in range(n):  # their `range(len(sample_batch))`, the prompt's n rows
        global_idx = start_idx + i_
        score = reward_tensor[global_idx].sum().item()
        scores[global_idx] = score

        if score > format_coefficient + 0.5:
            correct_positions.append(i_)
        else:
            incorrect_positions.append(i_)

    success_rate = len(correct_positions) / n
    # self.success_threshold = effective_k / n
    success_threshold = 1 / n
    sample_success = success_rate >= success_threshold

    if injection_strategy == 'adaptive':
        needs_injection = not sample_success
    elif injection_strategy == 'hybrid':
        if not sample_success:
            needs_injection = True
        else:
            needs_injection = np.random.random() < 0.3
    elif injection_strategy == 'always':  # 'always'
        needs_injection = True
    else:
        needs_injection = False

    return needs_injection, correct_positions, incorrect_positions


def shaping_function(shaping_function_name):
    """prob.py L151-153 (`ProbRewardManager.__init__`, the 'threshold' branch the script's threshold_0 takes)."""
    if shaping_function_name.startswith('threshold'):
        threshold = float(shaping_function_name.split('_')[-1])
        return lambda x: 0 if x < threshold else x
    raise NotImplementedError(f"{shaping_function_name=}")


def compute_scoreB(old_log_probs, ground_truth_mask, compute_score_name="mean_exp_log_softmax",
                   gt_tokens_one_more=False, gt_tokens_one_more_adjusted=False):
    """prob.py L308-334 (`self.` settings as arguments)."""
    if ground_truth_mask.sum() == 0:
        scoreB = 0
    else:
        old_log_probs_in_gt = old_log_probs[ground_truth_mask.bool()]
        if gt_tokens_one_more and gt_tokens_one_more_adjusted:
            old_log_probs_in_gt[-1] = min(old_log_probs_in_gt[-1], np.log(0.5))
        # Convert to BF32 for higher precision calculations
        old_log_probs_in_gt = old_log_probs_in_gt.to(torch.float32)
        # mean of probs
        if compute_score_name == 'mean_exp_log_softmax':
            scoreB = torch.mean(torch.exp(old_log_probs_in_gt)).item()
        # mean log probs
        elif compute_score_name == 'mean_log_softmax':
            scoreB = torch.mean(old_log_probs_in_gt).item()
        # product of probs
        elif compute_score_name == 'exp_sum_log_softmax':
            scoreB = torch.exp(torch.sum(old_log_probs_in_gt)).item()
        # root of the product of probs
        elif compute_score_name == 'exp_mean_log_softmax':
            scoreB = torch.exp(torch.mean(old_log_probs_in_gt)).item()
        else:
            raise ValueError
        # Convert the final score back to BF16 if necessary
        scoreB = torch.tensor(scoreB, dtype=torch.bfloat16).item()

    return scoreB


def prob_score(scoreA, scoreB, format_score, format_coefficient, shaping_function_name="threshold_0",
               discrete_function_name="identity"):
    """prob.py L245-255 (`__call__`, one item): the teacher's selection score."""
    score_delta = scoreB - scoreA
    score_delta = shaping_function(shaping_function_name)(score_delta)
    if discrete_function_name is not None and discrete_function_name != 'identity':
        raise NotImplementedError  # bin_ mapping: not the script's
    if format_coefficient == -1:
        score = score_delta if format_score == 1 else 0
    else:
        score = (1 - format_coefficient) * (score_delta) + format_coefficient * format_score
    return score


def kept_targets(rm_scores, effective_k):
    """mix_dapo_trainer.py `_sort_batch_by_scores` L1753-1762 (score_key 'rm_scores') then L1547: the indices of the
    teachers kept, best first (their `torch.argsort(descending=True)`, not a stable sort)."""
    scores_tensor = rm_scores  # shape: [batch_size, response_length]
    total_scores = scores_tensor.sum(dim=1)  # shape: [batch_size]
    sorted_indices = torch.argsort(total_scores, descending=True)
    return sorted_indices[:effective_k]


def forced_teacher_reward(rm_scores, valid_response_length):
    """mix_dapo_trainer.py L1594-1601: a chosen teacher's token-level reward whose total is below 1 gets 1 on its last
    response token (returns the row and its new total)."""
    rm_scores = rm_scores.clone()
    off_policy_score = rm_scores.sum().item()

    if off_policy_score < 1.0:
        rm_scores[valid_response_length - 1] = 1.0

    off_policy_score = rm_scores.sum().item()
    return rm_scores, off_policy_score


class Config(dict):
    """Their DictConfig: keys as attributes."""

    __getattr__ = dict.__getitem__


def compute_token_on_seq_off_policy_loss(old_log_prob, log_prob, advantages, eos_mask, prefix_mask, target_probs=None,
                                         loss_agg_mode: str = "token-mean", config=None):
    """mix_core_alg.py L304-593, the returned dict in full."""
    device = log_prob.device

    assert config is not None
    clip_ratio = config.clip_ratio
    clip_ratio_low = config.clip_ratio_low if config.clip_ratio_low is not None else clip_ratio
    clip_ratio_high = config.clip_ratio_high if config.clip_ratio_high is not None else clip_ratio
    clip_ratio_c = config.get(
        "clip_ratio_c", 3.0
    )

    cliprange = clip_ratio
    cliprange_low = clip_ratio_low
    cliprange_high = clip_ratio_high
    assert clip_ratio_c > 1.0, (
        "The lower bound of the clip_ratio_c for dual-clip PPO should be greater than 1.0,"
        + f" but get the value: {clip_ratio_c}."
    )

    # off_cliprange = config.off_policy_cliprange
    off_normalize = config.off_policy_normalize  # noqa: F841 (read, unused, as theirs)
    off_max_clip = config.off_policy_max_clip if config.off_policy_max_clip != -1 else None
    off_min_clip = config.off_policy_min_clip if config.off_policy_min_clip != -1 else None
    all_max_clip = config.all_max_clip if config.all_max_clip != -1 else None
    off_policy_reshape = config.get("off_policy_reshape", "no_reshape")
    off_policy_reshape_weight = config.get("off_policy_reshape_weight", 1.0)
    off_policy_reshape_pow_exp = config.get("off_policy_reshape_pow_exp", 0.5)
    on_policy_reshape = config.get("on_policy_reshape", "no_reshape")
    on_policy_reshape_weight = config.get("on_policy_reshape_weight", 1.0)
    on_policy_reshape_pow_exp = config.get("on_policy_reshape_pow_exp", 0.5)
    loss_remove_token_mean = config.get("loss_remove_token_mean", False)
    loss_remove_clip = config.get("loss_remove_clip", False)

    # on-policy loss

    negative_approx_kl = log_prob - old_log_prob
    # Clamp negative_approx_kl for stability
    negative_approx_kl = torch.clamp(negative_approx_kl, min=-20.0, max=20.0)
    ratio = torch.exp(negative_approx_kl)
    ppo_kl = masked_mean(-negative_approx_kl, eos_mask)

    if on_policy_reshape == "no_reshape":
        ratio = torch.exp(negative_approx_kl)  # [bsz, l]
    elif on_policy_reshape == "logp":
        ratio = log_prob - old_log_prob
    elif on_policy_reshape == "p_logp":
        ratio = torch.exp(negative_approx_kl) + on_policy_reshape_weight * negative_approx_kl
    elif on_policy_reshape == "square_root":
        ratio = torch.exp(negative_approx_kl)  # [bsz, l]
        ratio = torch.sqrt(ratio)
    elif on_policy_reshape == "pow":
        ratio = torch.exp(negative_approx_kl)  # [bsz, l]
        ratio = torch.pow(ratio, on_policy_reshape_pow_exp)
    elif on_policy_reshape == "p_div_p_0.1":
        prob = torch.exp(log_prob)
        old_prob = torch.exp(old_log_prob)
        f_prob = prob / (prob + 0.1)
        f_old_prob = old_prob / (old_prob + 0.1)
        ratio = f_prob / f_old_prob
    elif on_policy_reshape == "p_div_p_0.5":
        prob = torch.exp(log_prob)
        old_prob = torch.exp(old_log_prob)
        f_prob = prob / (prob + 0.5)
        f_old_prob = old_prob / (old_prob + 0.5)
        ratio = f_prob / f_old_prob
    else:
        raise ValueError(f"Invalid on_policy_reshape: {on_policy_reshape}")

    on_pg_losses = -advantages * ratio

    if loss_remove_clip is False:
        if cliprange_low is None:
            cliprange_low = cliprange
        if cliprange_high is None:
            cliprange_high = cliprange

        on_pg_losses2 = -advantages * torch.clamp(
            ratio, 1 - cliprange_low, 1 + cliprange_high
        )  # - clip(ratio, 1-cliprange, 1+cliprange) * A
        clip_on_pg_losses1 = torch.maximum(
            on_pg_losses, on_pg_losses2
        )  # max(-ratio * A, -clip(ratio, 1-cliprange, 1+cliprange) * A)
        on_pg_clipfrac = masked_mean(torch.gt(on_pg_losses2, on_pg_losses).float(), eos_mask)

        on_pg_losses3 = -advantages * clip_ratio_c
        clip_pg_losses2 = torch.min(on_pg_losses3, clip_on_pg_losses1)
        on_pg_clipfrac_lower = masked_mean(
            torch.gt(clip_on_pg_losses1, on_pg_losses3) * (advantages < 0).float(), eos_mask
        )

        on_pg_losses = torch.where(advantages < 0, clip_pg_losses2, clip_on_pg_losses1)
        loss_mask = (~prefix_mask) * eos_mask
        on_pg_loss = agg_loss(loss_mat=on_pg_losses, loss_mask=loss_mask, loss_agg_mode=loss_agg_mode)

    else:
        loss_mask = (~prefix_mask) * eos_mask
        on_pg_loss = agg_loss(loss_mat=on_pg_losses, loss_mask=loss_mask, loss_agg_mode=loss_agg_mode)
        on_pg_clipfrac = torch.tensor(0.0)
        on_pg_clipfrac_lower = torch.tensor(0.0)

    if on_pg_loss.isnan().item() is True:
        on_pg_loss = torch.tensor(0.0, device=device)

    # compute off-policy loss
    off_target_losses = []
    off_target_probs = []
    all_off_ratio_stats = {
        'off_ratio_mean': [],
        'off_ratio_max_clip_frac': [],
        'off_ratio_min_clip_frac': []
    }

    combined_off_pg_losses = torch.zeros_like(on_pg_losses, device=device)
    off_policy_indices = torch.where(prefix_mask.any(dim=-1))[0].tolist()
    effective_k = len(off_policy_indices)
    for k in range(effective_k):
        target_mask = torch.zeros_like(prefix_mask, dtype=torch.bool, device=device)
        target_indices = [idx for i, idx in enumerate(off_policy_indices) if i % effective_k == k]

        for sample_idx in target_indices:
            target_mask[sample_idx] = prefix_mask[sample_idx]

        if target_mask.any():
            if target_probs is None:
                off_ratio = torch.exp(log_prob)  # [bsz, l]
                if off_policy_reshape == "no_reshape":
                    pass
                elif off_policy_reshape == "logp":
                    off_ratio = log_prob * off_policy_reshape_weight
                elif off_policy_reshape == "p_logp":
                    off_ratio = log_prob * off_policy_reshape_weight + off_ratio
                elif off_policy_reshape == "square_root":
                    off_ratio = torch.sqrt(off_ratio)
                elif off_policy_reshape == "p_div_p_0.1":
                    off_ratio = off_ratio / (off_ratio + 0.1)
                elif off_policy_reshape == "p_div_p_0.5":
                    off_ratio = off_ratio / (off_ratio + 0.5)
                elif off_policy_reshape == "p_div_p_0.3":
                    off_ratio = off_ratio / (off_ratio + 0.3)
                elif off_policy_reshape == "pow":
                    off_ratio = torch.pow(off_ratio, off_policy_reshape_pow_exp)
                else:
                    raise ValueError(f"Invalid off_policy_reshape: {off_policy_reshape}")
            else:
                assert target_probs.shape == log_prob.shape
                off_ratio = torch.exp(log_prob) / (target_probs + 1e-6)
                off_ratio = off_ratio * target_mask.float()

            # clip off-policy ratio
            if off_max_clip is not None:
                off_ratio = torch.clamp(off_ratio, max=off_max_clip)
                target_max_clip_frac = masked_mean((off_ratio == off_max_clip).float(), target_mask * eos_mask)
                all_off_ratio_stats['off_ratio_max_clip_frac'].append(target_max_clip_frac)
            else:
                all_off_ratio_stats['off_ratio_max_clip_frac'].append(torch.tensor(0.0, device=device))

            if off_min_clip is not None:
                off_ratio = torch.clamp(off_ratio, min=off_min_clip)
                target_min_clip_frac = masked_mean((off_ratio == off_min_clip).float(), target_mask * eos_mask)
                all_off_ratio_stats['off_ratio_min_clip_frac'].append(target_min_clip_frac)
            else:
                all_off_ratio_stats['off_ratio_min_clip_frac'].append(torch.tensor(0.0, device=device))

            target_off_ratio_mean = masked_mean(off_ratio, target_mask * eos_mask)
            if target_off_ratio_mean.isnan().any().item():
                target_off_ratio_mean = torch.tensor(0.0, device=device)
            all_off_ratio_stats['off_ratio_mean'].append(target_off_ratio_mean)

            target_off_pg_losses = -advantages * off_ratio
            target_off_pg_loss = masked_mean(target_off_pg_losses, target_mask * eos_mask)

            if target_off_pg_loss.isnan().item() is True:
                target_off_pg_loss = torch.tensor(0.0, device=device)

            off_target_losses.append(target_off_pg_loss)

            combined_off_pg_losses = combined_off_pg_losses + target_off_pg_losses * target_mask.float()

            target_off_policy_probs = torch.exp(log_prob)
            target_off_policy_prob = masked_mean(target_off_policy_probs, target_mask.float() * eos_mask)
            if target_off_policy_prob.isnan().item() is True:
                target_off_policy_prob = torch.tensor(0.0, device=device)
            off_target_probs.append(target_off_policy_prob)
        else:
            off_target_losses.append(torch.tensor(0.0, device=device))
            off_target_probs.append(torch.tensor(0.0, device=device))
            all_off_ratio_stats['off_ratio_mean'].append(torch.tensor(0.0, device=device))
            all_off_ratio_stats['off_ratio_max_clip_frac'].append(torch.tensor(0.0, device=device))
            all_off_ratio_stats['off_ratio_min_clip_frac'].append(torch.tensor(0.0, device=device))

    if len(off_target_losses) > 0:
        off_pg_loss = torch.stack(off_target_losses).mean()
    else:
        off_pg_loss = torch.tensor(0.0, device=device)

    off_ratio_mean = (torch.stack(all_off_ratio_stats['off_ratio_mean']).mean()
                      if all_off_ratio_stats['off_ratio_mean'] else torch.tensor(0.0, device=device))
    off_ratio_max_clip_frac = (torch.stack(all_off_ratio_stats['off_ratio_max_clip_frac']).mean()
                               if all_off_ratio_stats['off_ratio_max_clip_frac'] else torch.tensor(0.0, device=device))
    off_ratio_min_clip_frac = (torch.stack(all_off_ratio_stats['off_ratio_min_clip_frac']).mean()
                               if all_off_ratio_stats['off_ratio_min_clip_frac'] else torch.tensor(0.0, device=device))

    off_pg_clipfrac = torch.tensor(0.0, device=device)

    prefix_mask = prefix_mask.float()
    pg_losses = combined_off_pg_losses + on_pg_losses * (1 - prefix_mask)

    if len(off_target_probs) > 0:
        off_policy_prob = torch.stack(off_target_probs).mean()
    else:
        off_policy_probs = torch.exp(log_prob)
        off_policy_prob = masked_mean(off_policy_probs, prefix_mask * eos_mask)
        if off_policy_prob.isnan().item():
            off_policy_prob = torch.tensor(0.0, device=device)

    on_policy_probs = torch.exp(old_log_prob)
    on_policy_prob = masked_mean(on_policy_probs, (1.0 - prefix_mask) * eos_mask)
    if on_policy_prob.isnan().item() is True:
        on_policy_prob = torch.tensor(0.0, device=device)

    if all_max_clip is not None:
        p_on = torch.exp(log_prob)
        p_on_mask = (p_on <= all_max_clip).float()
        eos_mask = eos_mask * p_on_mask
        pg_losses = pg_losses * p_on_mask

    if loss_remove_token_mean is True:
        pg_loss = (pg_losses * eos_mask).sum() / eos_mask.shape[-1]
    else:
        pg_loss = agg_loss(loss_mat=pg_losses, loss_mask=eos_mask, loss_agg_mode=loss_agg_mode)

    result = {
        "pg_loss": pg_loss,
        "off_pg_loss": off_pg_loss,
        "on_pg_loss": on_pg_loss,
        "off_pg_clipfrac": off_pg_clipfrac,
        "on_pg_clipfrac": on_pg_clipfrac,
        "on_pg_clipfrac_lower": on_pg_clipfrac_lower,
        "ppo_kl": ppo_kl,
        "off_policy_prob": off_policy_prob,
        "on_policy_prob": on_policy_prob,
        "off_ratio_mean": off_ratio_mean,
        "off_ratio_max_clip_frac": off_ratio_max_clip_frac,
        "off_ratio_min_clip_frac": off_ratio_min_clip_frac,
    }

    for k, target_loss in enumerate(off_target_losses):
        result[f'off_policy_target_{k}_loss'] = target_loss
    for k, target_prob in enumerate(off_target_probs):
        result[f'off_policy_target_{k}_prob'] = target_prob

    return result


# exp_scripts/train_ampo.sh with config/mix_dapo_trainer.yaml's defaults: the loss settings of the released run
SCRIPT_LOSS_CONFIG = Config(
    clip_ratio=0.2, clip_ratio_low=0.2, clip_ratio_high=0.2, clip_ratio_c=10.0,  # L48-49, L121
    off_policy_normalize=False, off_policy_max_clip=-1, off_policy_min_clip=-1, all_max_clip=-1,  # L30, yaml L50-59
    off_policy_reshape="p_div_p_0.1", loss_remove_token_mean=True, loss_remove_clip=False)  # L31, L33-34
