"""RLVMR's step rewards and advantage transcribed from zzjweb/digitalhuman @ 789ccd6f5258f58fcacaa7af6d8e97941c393929
(a mirror of the official code; used by tests/anchors/test_rlvmr.py):

    RLVMR/code/rlvmr/core_rlvmr.py            process_trajectory_rlvmr_rewards, compute_rlvmr_outcome_advantage,
                                              episode_norm_reward, step_norm_reward_by_tag
    RLVMR/code/verl/trainer/ppo/ray_trainer.py  apply_invalid_action_penalty (its per-row arithmetic)

Variable names and the order of operations are the code's; a batch row is one *step* there (verl-agent's layout).
Dropped: the unused counters and value lists of process_trajectory_rlvmr_rewards, the DataProto plumbing of the
penalty (it subtracts coef * (1 - is_action_valid) from the step row's score at its last token). Kept: the
step-0 reflection quirk (`prev_action = ""`, a string, never equals the list `current_action`, so a first-step
reflection always earns) and the singleton rule (a group of one: mean 0, std 1).
"""
from __future__ import annotations

import re
from collections import defaultdict

import torch


def process_trajectory_rlvmr_rewards(trajectory_list, config, episode_rewards):
    for traj_idx, trajectory in enumerate(trajectory_list):
        is_success = episode_rewards[traj_idx] > 0
        for step_idx, step_data in enumerate(trajectory):
            if not step_data['active_masks']:
                continue
            full_output = step_data["full_output"]
            is_valid = step_data["is_action_valid"]
            step_data['rlvmr_tag_type'] = "none"
            step_data['rlvmr_step_reward'] = torch.tensor(0.0)
            if not is_valid:
                continue
            if '<planning>' in full_output:
                step_data["rlvmr_tag_type"] = "<planning>"
                if is_success:
                    step_data['rlvmr_step_reward'] = torch.tensor(config.algorithm.rlvmr.planning_reward)
                else:
                    step_data['rlvmr_step_reward'] = torch.tensor(0.0)
            elif '<explore>' in full_output:
                is_repeated = False
                for prev_step_idx in range(step_idx):
                    prev_output = trajectory[prev_step_idx]["full_output"]
                    prev_action = re.findall(r'<action>(.*?)</action>', prev_output)
                    prev_valid = trajectory[prev_step_idx]["is_action_valid"]
                    current_action = re.findall(r'<action>(.*?)</action>', full_output)
                    if prev_action == current_action and prev_valid:
                        is_repeated = True
                        break
                step_data["rlvmr_tag_type"] = "<explore>"
                if not is_repeated:
                    explore_reward = config.algorithm.rlvmr.exploration_reward
                    step_data['rlvmr_step_reward'] = torch.tensor(explore_reward)
                else:
                    step_data['rlvmr_step_reward'] = torch.tensor(0.0)
            elif '<reflection>' in full_output:
                step_data["rlvmr_tag_type"] = "<reflection>"
                current_action = re.findall(r'<action>(.*?)</action>', full_output)
                if step_idx > 0:
                    prev_step = trajectory[step_idx - 1]
                    prev_valid = prev_step["is_action_valid"] and prev_step['action_available']
                    prev_output = prev_step["full_output"]
                    prev_action = re.findall(r'<action>(.*?)</action>', prev_output)
                else:
                    prev_action = ""
                    prev_valid = False
                if not prev_valid and not (prev_action == current_action):
                    reflection_reward = config.algorithm.rlvmr.reflection_reward
                    step_data['rlvmr_step_reward'] = torch.tensor(reflection_reward)
                else:
                    step_data['rlvmr_step_reward'] = torch.tensor(0.0)
    return trajectory_list


def apply_invalid_action_penalty(token_level_scores, valid_response_length, is_action_valid,
                                 invalid_action_penalty_coef):
    """ray_trainer.py::apply_invalid_action_penalty, per step row i."""
    reward_tensor = token_level_scores.clone()
    for i in range(reward_tensor.shape[0]):
        action_invalids = 1.0 - float(is_action_valid[i])
        reward_tensor[i, valid_response_length[i] - 1] -= invalid_action_penalty_coef * action_invalids
    return reward_tensor


def compute_rlvmr_outcome_advantage(token_level_rewards, rlvmr_rewards, eos_mask, index, epsilon=1e-6,
                                    step_advantage_w=1.0, mode="mean_norm", tag_types=None, traj_id=None):
    if mode == "mean_std_norm":
        remove_std = False
    elif mode == "mean_norm":
        remove_std = True
    else:
        raise ValueError(f"Unknown mode: {mode}")
    if tag_types is None:
        tag_types = ['none'] * len(index)
    episode_advantages = episode_norm_reward(token_level_rewards, eos_mask, index, epsilon, remove_std)
    step_advantages = step_norm_reward_by_tag(step_rewards=rlvmr_rewards, eos_mask=eos_mask, index=index,
                                              tag_types=tag_types, epsilon=epsilon, remove_std=remove_std,
                                              traj_id=traj_id)
    scores = episode_advantages + step_advantage_w * step_advantages
    return scores, episode_advantages, step_advantages


def episode_norm_reward(token_level_rewards, eos_mask, index, epsilon=1e-6, remove_std=True):
    response_length = token_level_rewards.shape[-1]
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
                id2mean[idx] = torch.mean(torch.tensor(id2score[idx]))
                id2std[idx] = torch.std(torch.tensor(id2score[idx]))
            else:
                raise ValueError(f"no score in prompt index: {idx}")
        for i in range(bsz):
            if remove_std:
                scores[i] = scores[i] - id2mean[index[i]]
            else:
                scores[i] = (scores[i] - id2mean[index[i]]) / (id2std[index[i]] + epsilon)
        episode_advantages = scores.unsqueeze(-1).tile([1, response_length]) * eos_mask
    return episode_advantages


def step_norm_reward_by_tag(step_rewards, eos_mask, index, tag_types, epsilon=1e-6, remove_std=True, traj_id=None):
    response_length = eos_mask.shape[-1]
    scores = step_rewards.clone()
    group_keys = []
    for i in range(len(index)):
        group_key = (index[i], tag_types[i])
        group_keys.append(group_key)
    id2score = defaultdict(list)
    id2mean = {}
    id2std = {}
    with torch.no_grad():
        bsz = scores.shape[0]
        for i in range(bsz):
            group_key = group_keys[i]
            id2score[group_key].append(scores[i])
        for group_key in id2score:
            if len(id2score[group_key]) == 1:
                id2mean[group_key] = torch.tensor(0.0)
                id2std[group_key] = torch.tensor(1.0)
            elif len(id2score[group_key]) > 1:
                id2mean[group_key] = torch.mean(torch.tensor(id2score[group_key]))
                id2std[group_key] = torch.std(torch.tensor(id2score[group_key]))
            else:
                raise ValueError(f"no score in group: {group_key}")
        for i in range(bsz):
            group_key = group_keys[i]
            if remove_std:
                scores[i] = scores[i] - id2mean[group_key]
            else:
                scores[i] = (scores[i] - id2mean[group_key]) / (id2std[group_key] + epsilon)
        step_advantages = scores.unsqueeze(-1).tile([1, response_length]) * eos_mask
    return step_advantages
