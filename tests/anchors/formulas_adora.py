"""ADORA's group re-weighting transcribed from ShadeCloak/ADORA @ c518485324b136e0fea6a7f280c1d224f94d13d5
(used by tests/anchors/test_adora.py):

    ADORA/verl/trainer/ppo/core_algos.py                       compute_grpo_outcome_advantage_ADORA (L110-190)
    ADORA_VL/openrlhf/trainer/ppo_utils/experience_maker_vl.py weight_func (L1260)

Copied by hand, keeping the code's names and order of operations; only `device` handling is dropped.
"""
from __future__ import annotations

from collections import defaultdict

import torch


def compute_grpo_outcome_advantage_ADORA(token_level_rewards: torch.Tensor, eos_mask: torch.Tensor, index,
                                         epsilon: float = 1e-6, correct_score: float = 1.01, lamda: float = 0.1,
                                         max_length_threshold: int = 4054):
    response_length_dim = token_level_rewards.shape[-1]

    scores = (token_level_rewards * (token_level_rewards != 0)).sum(dim=-1)
    response_lengths = eos_mask.sum(dim=1).float()
    original_scores = scores.clone()

    id2original = defaultdict(list)
    id2length = defaultdict(list)

    with torch.no_grad():
        bsz = scores.shape[0]

        for i in range(bsz):
            idx = str(index[i])
            id2original[idx].append(original_scores[i].item())
            id2length[idx].append(response_lengths[i].item())

        group_params = {}
        for idx in id2original:
            raw_scores = torch.tensor(id2original[idx], dtype=torch.float32)
            lengths = torch.tensor(id2length[idx], dtype=torch.float32)

            pos_mask = raw_scores > correct_score
            neg_mask = (raw_scores <= correct_score) & (lengths < max_length_threshold)

            pos_lengths = lengths[pos_mask]
            neg_lengths = lengths[neg_mask]

            max_pos = pos_lengths.max().item() if pos_lengths.numel() > 0 else -float('inf')
            mean_neg = neg_lengths.mean().item() if neg_lengths.numel() > 0 else -float('inf')

            group_params[idx] = {
                'n_samples': len(raw_scores),
                'pos_count': pos_mask.sum().item(),
                'pos_lengths': pos_lengths,
                'neg_lengths': neg_lengths,
                'length_advantage': (max_pos > mean_neg),
                'max_pos': max_pos,
                'mean_neg': mean_neg
            }

        unique_indices = list(group_params.keys())
        for idx in unique_indices:
            mask = torch.tensor([str(index[i]) == idx for i in range(bsz)])
            group_scores = scores[mask]

            if group_scores.numel() > 1:
                mean = group_scores.mean()
                std = group_scores.std()
                scores[mask] = (group_scores - mean) / (std + epsilon)
            else:
                scores[mask] = scores[mask]

        for idx in unique_indices:
            params = group_params[idx]
            if not params['length_advantage']:
                mask = torch.tensor([str(index[i]) == idx for i in range(bsz)])
                scores[mask] *= lamda

        scores = scores.unsqueeze(-1).expand(-1, response_length_dim) * eos_mask

    return scores, scores


def weight_func(rewards, response_length, lamda=0.1):
    """rewards, response_length: [num_prompts, n_samples_per_prompt]; weights of the same shape."""
    weights = torch.ones_like(rewards, device=rewards.device)
    for i in range(rewards.shape[0]):
        reward_row = rewards[i]
        response_row = response_length[i]
        response_reward_1 = response_row[reward_row > 0.5]
        response_reward_not_1 = response_row[(reward_row <= 0.5) & (response_row < 4094)]
        max_reward_1 = response_reward_1.max() if response_reward_1.numel() > 0 else float('-inf')
        mean_reward_not_1 = response_reward_not_1.mean() if response_reward_not_1.numel() > 0 else float('inf')

        if max_reward_1 > mean_reward_not_1 or response_reward_1.numel() == 0:
            pass
        else:
            weights[i] = lamda

    return weights
