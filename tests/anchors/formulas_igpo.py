"""IGPO's information gain and advantages transcribed from its two official versions (used by
tests/anchors/test_igpo.py):

(b) GuoqingWang1/IGPO @ 745078b5a35d0b84d3d9184e0f0de05ed04e11ad (the authors' Feb-2026 "code update", seen in the
    fork debajoycs98/IGPO):
      scrl/llm_agent/generation.py (L559-615)   the per-turn gain from the ground truth's mean log-prob before each
                                                turn: `prob_diff` or `log_prob_diff` (`gain_from_mean_logprobs`)
      verl/utils/reward_score/info_gain.py      compute_score: IG on each turn's last token, an IG of exactly 0 made
                                                1e-10, F1 on the last token (`place_rewards`, on a given layout)
      verl/trainer/ppo/core_algos.py            compute_grpo_outcome_advantage (joint / separate normalization,
                                                curriculum weights) + _compute_turn_level_advantage (L28)
(a) GuoqingWang1/IGPO @ bff163b72718a8b8f9175ce019ec7114ad6bd59a (the stored public HEAD):
      verl/trainer/ppo/core_algos.py            compute_grpo_outcome_advantage (L193): token reward-to-go minus the
                                                group's mean at each token position; here
                                                `compute_grpo_outcome_advantage_bff163b`

Variable names, dtypes (float32) and the order of operations are the code's; prints are dropped.
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np
import torch


def gain_from_mean_logprobs(mean_log_probs: list[float], info_gain_type: str = "prob_diff") -> list[float]:
    """generation.py's loop over turns (step 0 stores the value, every later step appends cur - previous)."""
    gt_values = None
    info_gain_rewards = []
    for step, mean_log_prob in enumerate(mean_log_probs):
        if step == 0:
            if info_gain_type == "log_prob_diff":
                gt_values = mean_log_prob
            else:
                gt_values = torch.exp(torch.tensor(mean_log_prob)).item()
        else:
            if info_gain_type == "log_prob_diff":
                cur_value = mean_log_prob
                info_gain = cur_value - gt_values
            else:
                cur_value = torch.exp(torch.tensor(mean_log_prob)).item()
                info_gain = cur_value - gt_values
            info_gain_rewards.append(info_gain)
            gt_values = cur_value
    return info_gain_rewards


def place_rewards(tokens_size: int, turn_last_token: list[int], info_gain_reward: list[float], f1_score: float):
    """info_gain.py's assignment loop, given each turn's last token index (their offset-mapping search)."""
    alpha = 1.0
    scores = [0.0] * tokens_size
    chats_size = len(turn_last_token)
    if info_gain_reward == [] or chats_size == 1:
        scores[-1] = alpha * f1_score
        return scores
    for i in range(chats_size):
        last_token_idx = min(turn_last_token[i], tokens_size - 1)
        if i < chats_size - 1:
            if i < len(info_gain_reward):
                ig_value = info_gain_reward[i]
                if ig_value == 0.0:
                    ig_value = 1e-10  # Avoid being skipped by !=0 check
                scores[last_token_idx] = ig_value
        else:
            scores[last_token_idx] = alpha * f1_score
    return scores


def _compute_turn_level_advantage(normalized_rewards, response_mask, gamma, bsz, seq_len, device):
    discounted_returns = torch.zeros(bsz, seq_len, device=device, dtype=normalized_rewards.dtype)
    for sample_idx in range(bsz):
        sample_rewards = normalized_rewards[sample_idx]
        sample_mask = response_mask[sample_idx]
        reward_positions = (sample_rewards != 0).nonzero(as_tuple=True)[0].tolist()
        if len(reward_positions) == 0:
            continue
        turn_data = []
        next_turn_adv = 0.0
        for pos in reversed(reward_positions):
            turn_reward = sample_rewards[pos].item()
            turn_adv = turn_reward + gamma * next_turn_adv
            turn_data.append((pos, turn_adv))
            next_turn_adv = turn_adv
        turn_data.reverse()
        prev_end = 0
        for i, (reward_pos, adv) in enumerate(turn_data):
            for t in range(prev_end, reward_pos + 1):
                if sample_mask[t] == 1:
                    discounted_returns[sample_idx, t] = adv
            prev_end = reward_pos + 1
    return discounted_returns


def compute_grpo_outcome_advantage(token_level_rewards, response_mask, index, epsilon=1e-6,
                                   norm_adv_by_std_in_grpo=True, gamma=1.0, info_gain_norm_mode="joint",
                                   curriculum_f1_weight=1.0, curriculum_ig_weight=1.0):
    """745078b."""
    bsz, seq_len = token_level_rewards.shape
    device = token_level_rewards.device

    with torch.no_grad():
        valid_lengths = response_mask.sum(dim=1).long()
        last_valid_pos = torch.clamp(valid_lengths - 1, min=0)
        position_indices = torch.arange(seq_len, device=device).unsqueeze(0).expand(bsz, -1)
        f1_mask = (position_indices == last_valid_pos.unsqueeze(1)) & (response_mask == 1)
        ig_mask = (response_mask == 1) & (~f1_mask) & (token_level_rewards != 0)

    if curriculum_f1_weight != 1.0 or curriculum_ig_weight != 1.0:
        weighted_rewards = token_level_rewards.clone()
        weighted_rewards = torch.where(f1_mask, token_level_rewards * curriculum_f1_weight, weighted_rewards)
        weighted_rewards = torch.where(ig_mask, token_level_rewards * curriculum_ig_weight, weighted_rewards)
        token_level_rewards = weighted_rewards

    unique_indices, inverse_indices = np.unique(index, return_inverse=True)
    group_ids = torch.tensor(inverse_indices, device=device, dtype=torch.long)
    num_groups = len(unique_indices)
    group_ids_expanded = group_ids.unsqueeze(1).expand(-1, seq_len)

    def compute_group_stats(mask):
        flat_mask = mask.view(-1)
        flat_rewards = token_level_rewards.view(-1)
        flat_group_ids = group_ids_expanded.reshape(-1)
        valid_idx = flat_mask.nonzero(as_tuple=True)[0]
        if valid_idx.numel() == 0:
            return torch.zeros(num_groups, device=device), torch.ones(num_groups, device=device)
        valid_rewards = flat_rewards[valid_idx]
        valid_groups = flat_group_ids[valid_idx]
        group_sum = torch.zeros(num_groups, device=device).scatter_add_(0, valid_groups, valid_rewards)
        group_count = torch.zeros(num_groups, device=device).scatter_add_(
            0, valid_groups, torch.ones_like(valid_rewards))
        group_mean = group_sum / group_count.clamp(min=1.0)
        expanded_mean = group_mean[valid_groups]
        sq_diff = (valid_rewards - expanded_mean) ** 2
        group_sq_sum = torch.zeros(num_groups, device=device).scatter_add_(0, valid_groups, sq_diff)
        group_var = group_sq_sum / group_count.clamp(min=1.0)
        group_std = torch.sqrt(group_var + 1e-8)
        group_std = torch.where(group_count <= 1, torch.ones_like(group_std), group_std)
        return group_mean, group_std

    normalized_rewards = torch.zeros_like(token_level_rewards)
    if info_gain_norm_mode == "separate":
        f1_mean, f1_std = compute_group_stats(f1_mask)
        f1_mean_map = f1_mean[group_ids_expanded]
        f1_std_map = f1_std[group_ids_expanded]
        norm_f1 = (token_level_rewards - f1_mean_map)
        if norm_adv_by_std_in_grpo:
            norm_f1 = norm_f1 / (f1_std_map + epsilon)
        normalized_rewards = torch.where(f1_mask, norm_f1, normalized_rewards)
        ig_mean, ig_std = compute_group_stats(ig_mask)
        ig_mean_map = ig_mean[group_ids_expanded]
        ig_std_map = ig_std[group_ids_expanded]
        norm_ig = (token_level_rewards - ig_mean_map)
        if norm_adv_by_std_in_grpo:
            norm_ig = norm_ig / (ig_std_map + epsilon)
        normalized_rewards = torch.where(ig_mask, norm_ig, normalized_rewards)
    else:  # joint
        joint_mask = f1_mask | ig_mask
        g_mean, g_std = compute_group_stats(joint_mask)
        mean_map = g_mean[group_ids_expanded]
        std_map = g_std[group_ids_expanded]
        norm_val = (token_level_rewards - mean_map)
        if norm_adv_by_std_in_grpo:
            norm_val = norm_val / (std_map + epsilon)
        normalized_rewards = torch.where(joint_mask, norm_val, normalized_rewards)

    discounted_returns = _compute_turn_level_advantage(
        normalized_rewards=normalized_rewards, response_mask=response_mask, gamma=gamma, bsz=bsz, seq_len=seq_len,
        device=device)
    return discounted_returns, discounted_returns


def compute_grpo_outcome_advantage_bff163b(token_level_rewards, response_mask, index, epsilon=1e-6,
                                           norm_adv_by_std_in_grpo=True):
    """bff163b's compute_grpo_outcome_advantage (L193)."""
    bsz, seq_len = token_level_rewards.shape
    device = token_level_rewards.device
    gamma = 1.0

    discounted_returns = torch.zeros_like(token_level_rewards)
    next_return = torch.zeros(bsz, device=device)
    for t in reversed(range(seq_len)):
        current_reward = token_level_rewards[:, t]
        current_mask = response_mask[:, t]
        current_return = current_reward + gamma * next_return
        discounted_returns[:, t] = current_return
        next_return = current_return * current_mask

    id2returns = defaultdict(list)
    id2mean = {}
    id2std = {}
    with torch.no_grad():
        for i in range(bsz):
            id2returns[index[i]].append(discounted_returns[i])
        for idx, group_returns_list in id2returns.items():
            group_returns_tensor = torch.stack(group_returns_list, dim=0)
            if group_returns_tensor.shape[0] <= 1:
                id2mean[idx] = group_returns_tensor.mean(dim=0)
                id2std[idx] = torch.ones(seq_len, device=device)
            else:
                id2mean[idx] = group_returns_tensor.mean(dim=0)
                id2std[idx] = group_returns_tensor.std(dim=0)

    advantages = torch.zeros_like(discounted_returns)
    for i in range(bsz):
        idx = index[i]
        mean_baseline = id2mean[idx]
        advantages[i] = discounted_returns[i] - mean_baseline

    advantages = advantages * response_mask
    final_returns = discounted_returns * response_mask
    return advantages, final_returns
