"""UI-S1's advantage transcribed from X-PLUG/MobileAgent @ 11cea575561fb7800b5fb6b6cafa56f7a91de11f (used by
tests/anchors/test_uis1.py), `UI-S1/uis1/core_uis1.py`:

    compute_step_discounted_returns   G_t over each trajectory, reset where `extract_match` is False; here over
                                      numpy arrays instead of a DataProto (`rewards`, `traj_uid`, `extract_match` of
                                      its non_tensor_batch)
    episode_norm_reward               the "episode" term over the prompt group (`compute_mean_std_cross_all_data`)
    step_norm_reward                  the step term over (prompt uid, step id)
    compute_uis1_outcome_advantage    w_ep * episode + w_step * step

One row per step: `index` = prompt uid, `traj_index` = trajectory uid, `step_index` = the step's id, and each row's
`token_level_rewards` hold that step's score (the reward manager scores every step sample on its own). Variable
names and the order of operations are the code's; `print` calls are dropped.
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np
import torch


def compute_step_discounted_returns(rewards: np.ndarray, traj_uids: np.ndarray, extract_match: np.ndarray, gamma):
    rewards = rewards.astype(np.float32)
    returns_by_traj = {}
    unique_traj_uids = np.unique(traj_uids)
    for uid in unique_traj_uids:
        traj_indices = np.where(traj_uids == uid)[0]
        traj_rewards = rewards[traj_indices]
        traj_extract_matches = extract_match[traj_indices]
        traj_returns = np.zeros_like(traj_rewards)
        running_return = 0.0
        for t in reversed(range(len(traj_rewards))):
            if traj_extract_matches[t]:
                running_return = traj_rewards[t] + gamma * running_return
                traj_returns[t] = running_return
            else:
                running_return = 0.0
                traj_returns[t] = traj_rewards[t]
        returns_by_traj[uid] = traj_returns
    all_returns = np.zeros_like(rewards)
    for i, uid in enumerate(traj_uids):
        traj_indices = np.where(traj_uids == uid)[0]
        idx_in_traj = np.where(traj_indices == i)[0][0]
        all_returns[i] = returns_by_traj[uid][idx_in_traj]
    return torch.tensor(all_returns, dtype=torch.float32)


def compute_uis1_outcome_advantage(token_level_rewards, step_rewards, response_mask, index, traj_index, step_index,
                                   epsilon=1e-6, step_advantage_w=1.0, episode_advantage_w=1.0, mode="mean_norm"):
    if mode == "mean_std_norm":
        remove_std = False
    elif mode == "mean_norm":
        remove_std = True
    else:
        raise ValueError(f"Unknown mode: {mode}")
    episode_advantages = episode_norm_reward(token_level_rewards, response_mask, index, traj_index, epsilon, remove_std)
    step_advantages = step_norm_reward(step_rewards, response_mask, index, step_index, epsilon, remove_std)
    scores = episode_advantage_w * episode_advantages + step_advantage_w * step_advantages
    return scores, scores


def episode_norm_reward(token_level_rewards, response_mask, index, traj_index, epsilon=1e-6, remove_std=True,
                        compute_mean_std_cross_all_data=True):
    response_length = token_level_rewards.shape[-1]
    scores = token_level_rewards.sum(dim=-1)
    id2score = defaultdict(list)
    id2mean = {}
    id2std = {}
    seen_pairs = set()
    with torch.no_grad():
        bsz = scores.shape[0]
        for i in range(bsz):
            if (index[i], traj_index[i]) in seen_pairs:
                continue
            id2score[index[i]].append(scores[i])
            if not compute_mean_std_cross_all_data:
                seen_pairs.add((index[i], traj_index[i]))
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
            if remove_std:
                scores[i] = scores[i] - id2mean[index[i]]
            else:
                scores[i] = (scores[i] - id2mean[index[i]]) / (id2std[index[i]] + epsilon)
        episode_advantages = scores.unsqueeze(-1).tile([1, response_length]) * response_mask
    return episode_advantages


def step_norm_reward(step_rewards, response_mask, index, step_id, epsilon=1e-6, remove_std=True):
    response_length = response_mask.shape[-1]
    scores = step_rewards.clone()
    id2score = defaultdict(list)
    id2mean = {}
    id2std = {}
    with torch.no_grad():
        bsz = scores.shape[0]
        for i in range(bsz):
            id2score[f"{index[i]}-{step_id[i]}"].append(scores[i])
        for idx in id2score:
            if len(id2score[idx]) == 1:
                id2mean[idx] = torch.mean(torch.tensor(id2score[idx]))
                id2std[idx] = torch.tensor(1.0)
            elif len(id2score[idx]) > 1:
                id2mean[idx] = torch.mean(torch.tensor(id2score[idx]))
                id2std[idx] = torch.std(torch.tensor([id2score[idx]]))
            else:
                raise ValueError(f"no score in prompt index: {idx}")
        for i in range(bsz):
            if remove_std:
                scores[i] = scores[i] - id2mean[f"{index[i]}-{step_id[i]}"]
            else:
                scores[i] = (scores[i] - id2mean[f"{index[i]}-{step_id[i]}"]) / (
                    id2std[f"{index[i]}-{step_id[i]}"] + epsilon)
        step_advantages = scores.unsqueeze(-1).tile([1, response_length]) * response_mask
    return step_advantages
