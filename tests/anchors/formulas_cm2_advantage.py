"""CM2's turn- and step-level advantages transcribed from namezhenzhang/CM2-RLCR-Tool-Agent @
2758991a6b755738605bf66a70c259c2d6f961cf (used by tests/anchors/test_cm2_advantage.py), verl_v0.6.1_checklist/verl/:

    trainer/ppo/core_algos.py            compute_checklist_step_advantage (L270-440): the turn level, per turn
                                         *position* group statistics over the turn-end rewards (<= 4 samples: NaN,
                                         advantage 0), scattered over (previous turn end, this turn end]
    workers/reward_manager/checklist.py  ChecklistRewardManager (L362-610, `reward_level == "step"`): the item
                                         statistics pass and the per-step advantage pass

Kept: the code's names and order of operations. Dropped: logging, the tool/judge-failure exclusion (every sample
succeeds here), several checklists per sample (one here, checklist_idx 0), the token layout of the step level
(the advantage per step index is returned; the code writes it over that step's response segment), devices.
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np
import torch


def turn_level_advantage(reward_tensor_non_norm: torch.Tensor, turn_end_tensor: torch.Tensor, index, *,
                         epsilon: float = 1e-6, norm_adv_by_std_in_grpo: bool = False) -> torch.Tensor:
    """compute_checklist_step_advantage's turn level on the un-normalized turn-end rewards [bs, seq_len]."""
    device, dtype = reward_tensor_non_norm.device, reward_tensor_non_norm.dtype
    bsz, seq_len = reward_tensor_non_norm.shape
    with torch.no_grad():
        id2indices = defaultdict(list)
        for i in range(bsz):
            id2indices[index[i]].append(i)

        sample_end_positions = []
        sample_end_rewards = []
        for i in range(bsz):
            end_pos_i = torch.nonzero(turn_end_tensor[i], as_tuple=False).squeeze(-1)
            sample_end_positions.append(end_pos_i)
            if end_pos_i.numel() > 0:
                sample_end_rewards.append(reward_tensor_non_norm[i, end_pos_i])
            else:
                sample_end_rewards.append(torch.empty((0,), device=device, dtype=dtype))

        normalized_end_rewards = [torch.empty_like(sample_end_rewards[i]) for i in range(bsz)]
        for gid, sample_ids in id2indices.items():
            max_k = 0
            for si in sample_ids:
                max_k = max(max_k, sample_end_rewards[si].numel())

            for k in range(max_k):
                vals_k = []
                holders = []
                for si in sample_ids:
                    if sample_end_rewards[si].numel() > k:
                        vals_k.append(sample_end_rewards[si][k].unsqueeze(0))
                        holders.append(si)
                if len(vals_k) == 0:
                    continue
                vals_k_tensor = torch.cat(vals_k, dim=0)
                mean_k = torch.mean(vals_k_tensor)
                if norm_adv_by_std_in_grpo and vals_k_tensor.numel() > 1:
                    std_k = torch.std(vals_k_tensor)
                else:
                    std_k = torch.tensor(1.0, device=device, dtype=dtype)
                for idx_holder, si in enumerate(holders):
                    if len(holders) <= 4:
                        norm_val = torch.tensor(float('nan'))
                    else:
                        if norm_adv_by_std_in_grpo:
                            norm_val = (vals_k_tensor[idx_holder] - mean_k) / (std_k + epsilon)
                        else:
                            norm_val = vals_k_tensor[idx_holder] - mean_k
                    normalized_end_rewards[si][k] = norm_val

        advantages = torch.zeros_like(reward_tensor_non_norm)
        for i in range(bsz):
            ends_i = sample_end_positions[i]
            if ends_i.numel() == 0:
                continue
            prev_end = -1
            for t_idx, end_pos in enumerate(ends_i.tolist()):
                val = normalized_end_rewards[i][t_idx]
                start = prev_end + 1
                end = end_pos + 1
                assert start < end
                if not torch.isnan(val):
                    advantages[i, start:end] = val
                prev_end = end_pos
    return advantages


def step_level_advantage(this_checklist_results: list, *, eta: float = 1.0, threthod_num: int = 4,
                         do_norm_in_adv: bool = False) -> dict:
    """The reward manager's step level for the rollouts of one uuid and one checklist. this_checklist_results[j] =
    (i, step_standards [per step: per item bool], step_turn_indices [per step], dependence_list [per turn: per item:
    dependency indices], per_turn_weights [per turn: per item]). Returns {i: {step_idx: advantage}} for the steps
    that get one (the others keep 0)."""
    # step 1: statistics per turn and item (turn_standard_scores), the rollouts' scores
    stats = {}
    dependence_list = this_checklist_results[0][3]
    num_turns = len(dependence_list)
    turn_standard_scores = {}
    for this_checklist_result_idx, this_checklist_result in enumerate(this_checklist_results):
        step_standards = this_checklist_result[1]
        step_turn_indices = this_checklist_result[2]
        turn_completed_standards = {}
        previous_turn = -1
        fist_step_this_turn = -1
        for step_idx, (step_standard_results, turn_idx) in enumerate(zip(step_standards, step_turn_indices)):
            assert 0 <= turn_idx < num_turns
            if turn_idx != previous_turn:
                previous_turn = turn_idx
                fist_step_this_turn = step_idx
            if turn_idx not in turn_completed_standards:
                turn_completed_standards[turn_idx] = {}
            turn_dependence = dependence_list[turn_idx]
            for standard_idx, standard_result in enumerate(step_standard_results):
                if standard_idx >= len(turn_dependence):
                    continue
                dependencies_met = True
                max_step_dependencies_met = -1
                if len(turn_dependence[standard_idx]) == 0:
                    max_step_dependencies_met = fist_step_this_turn - 1
                for dep_idx in turn_dependence[standard_idx]:
                    if dep_idx not in turn_completed_standards[turn_idx]:
                        dependencies_met = False
                        break
                    else:
                        max_step_dependencies_met = max(max_step_dependencies_met,
                                                        turn_completed_standards[turn_idx][dep_idx])
                if dependencies_met and standard_idx not in turn_completed_standards[turn_idx]:
                    if turn_idx not in turn_standard_scores:
                        turn_standard_scores[turn_idx] = {}
                    if standard_idx not in turn_standard_scores[turn_idx]:
                        turn_standard_scores[turn_idx][standard_idx] = [np.nan] * len(this_checklist_results)
                    if standard_result:
                        standard_score = 1.0 * (eta ** (step_idx - max_step_dependencies_met - 1))
                        turn_standard_scores[turn_idx][standard_idx][this_checklist_result_idx] = standard_score
                    else:
                        if np.isnan(turn_standard_scores[turn_idx][standard_idx][this_checklist_result_idx]):
                            turn_standard_scores[turn_idx][standard_idx][this_checklist_result_idx] = 0.0
                    if standard_result:
                        turn_completed_standards[turn_idx][standard_idx] = step_idx
    for turn_idx in range(num_turns):
        stats[turn_idx] = {}
        if turn_idx in turn_standard_scores:
            for standard_idx, scores in turn_standard_scores[turn_idx].items():
                not_nan_score = [x for x in scores if not np.isnan(x)]
                if len(not_nan_score) > 0:
                    mean_score = np.mean(not_nan_score)
                    std_score = np.std(not_nan_score) if len(not_nan_score) > 1 else 1.0
                    std_score = max(std_score, 1e-6)
                    stats[turn_idx][standard_idx] = (mean_score, std_score, len(not_nan_score))

    # steps 2 and 3: the advantage of each step of each rollout
    out = {}
    for this_checklist_result in this_checklist_results:
        i = this_checklist_result[0]
        out[i] = {}
        step_standards = this_checklist_result[1]
        step_turn_indices = this_checklist_result[2]
        dependence_list = this_checklist_result[3]
        per_turn_weights = this_checklist_result[4]
        for step_idx in range(len(step_standards)):
            all_actual_scores, all_mean_scores, all_weights = [], [], []
            step_standard_results = step_standards[step_idx]
            turn_idx = step_turn_indices[step_idx]
            turn_stats = stats[turn_idx]
            turn_dependence = dependence_list[turn_idx]
            turn_weights = per_turn_weights[turn_idx]

            turn_completed_standards = set()
            for prev_step_idx in range(step_idx):
                prev_step_results = step_standards[prev_step_idx]
                prev_turn_idx = step_turn_indices[prev_step_idx]
                if prev_turn_idx == turn_idx:
                    for std_idx, std_result in enumerate(prev_step_results):
                        if std_result and std_idx < len(turn_dependence):
                            dependencies_met = True
                            for dep_idx in turn_dependence[std_idx]:
                                if dep_idx not in turn_completed_standards:
                                    dependencies_met = False
                                    break
                            if dependencies_met:
                                turn_completed_standards.add(std_idx)

            turn_completed_for_full_check = {}
            first_step_this_turn = -1
            previous_turn = -1
            for check_step_idx in range(len(step_standards)):
                check_turn_idx = step_turn_indices[check_step_idx]
                if check_turn_idx != previous_turn:
                    previous_turn = check_turn_idx
                    first_step_this_turn = check_step_idx
                if check_turn_idx == turn_idx:
                    check_step_results = step_standards[check_step_idx]
                    for std_idx, std_result in enumerate(check_step_results):
                        if std_result:
                            dependencies_met = True
                            max_step_dependencies_met = -1
                            if len(turn_dependence[std_idx]) == 0:
                                max_step_dependencies_met = first_step_this_turn - 1
                            for dep_idx in turn_dependence[std_idx]:
                                if dep_idx not in turn_completed_for_full_check:
                                    dependencies_met = False
                                    break
                                else:
                                    max_step_dependencies_met = max(max_step_dependencies_met,
                                                                    turn_completed_for_full_check[dep_idx])
                            if dependencies_met:
                                turn_completed_for_full_check[std_idx] = check_step_idx - max_step_dependencies_met - 1

            for standard_idx, standard_result in enumerate(step_standard_results):
                if standard_idx >= len(turn_dependence) or standard_idx not in turn_stats:
                    continue
                dependencies_met = True
                for dep_idx in turn_dependence[standard_idx]:
                    if dep_idx not in turn_completed_standards:
                        dependencies_met = False
                        break
                if dependencies_met and standard_idx not in turn_completed_standards:
                    mean_score, std_score, num_scores = turn_stats[standard_idx]
                    if num_scores > threthod_num:
                        actual_score = 1.0 * (eta ** turn_completed_for_full_check[standard_idx]) \
                            if standard_idx in turn_completed_for_full_check else 0.0
                    else:
                        actual_score = mean_score
                    weight = turn_weights[standard_idx]
                    all_actual_scores.append(actual_score * weight)
                    all_mean_scores.append(mean_score * weight)
                    all_weights.append(weight)
            if len(all_actual_scores) > 0:
                total_actual = sum(all_actual_scores)
                total_mean = sum(all_mean_scores)
                total_weight = sum(all_weights)
                total_weight = total_weight if total_weight != 0 else 1.0
                final_advantage = (total_actual - total_mean) / (total_weight if do_norm_in_adv else 1.0)
                out[i][step_idx] = final_advantage
    return out
