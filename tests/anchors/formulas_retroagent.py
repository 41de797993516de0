"""RetroAgent's intrinsic numerical feedback transcribed from its repository (used by
tests/anchors/test_retroagent.py).

Source: zhangxy-2019/RetroAgent at commit 90eb71f4e596f50cbab6c875d4fe121353884a1b, rl_trained_self_reflection/ (a
verl-agent fork; not importable here: it needs verl, ray and sentence-transformers):

    agent_system/multi_turn_rollout/rollout_loop.py
        TrajectoryCollector._calculate_reflection_coefficient
        the reflection block of the rollout: reflect_rewards = final_intrinsic_rewards * reflection_coeff, then the
        optional clip (instrinsic_rewards_upper/lower_clipping_ratio)
    agent_system/environments/env_manager.py (AlfWorldEnvironmentManager)
        reset: batch_previous_potentials from task_potential_history
        step_reflect: current_phi, improvement, group centering, task_potential_history update
    agent_system/memory/memory.py
        ReflectionMemory._update_score_internal, ReflectionMemory.retrieve (the "ucb" score of one candidate)

Variable names and the order of operations are the code's. The reflection's JSON parsing is dropped: the
subtask fraction `subtask_phi` is given per row (the reference parses it from the reflection's JSON), as is
`actual_success` (info['won']).
"""
from __future__ import annotations

import math

import numpy as np


def calculate_reflection_coefficient(current_step, total_steps, hard_cutoff=False):
    """rollout_loop.py `_calculate_reflection_coefficient` (config.algorithm.intrinsic_hard_cutoff -> hard_cutoff)."""
    if total_steps <= 0:
        return 1.0

    progress = current_step / total_steps
    progress = max(0.0, min(1.0, progress))

    if hard_cutoff:
        cutoff_point = 0.10
        if progress > cutoff_point:
            return 0.0
        normalized_progress = progress / cutoff_point
        alpha = 6.9
        coefficient = np.exp(-alpha * normalized_progress)
    else:
        alpha = 5.0
        coefficient = np.exp(-alpha * progress)

    return float(coefficient)


class EnvState:
    """The env manager's state across steps: task_potential_history (the per-task baseline)."""

    def __init__(self, group_n, group_relative_intrinsic_rewards=False, potential_based_on_binary_success=False):
        self.group_n = group_n
        self.group_relative_intrinsic_rewards = group_relative_intrinsic_rewards
        self.potential_based_on_binary_success = potential_based_on_binary_success
        self.task_potential_history = {}

    def reset(self, tasks):
        """reset(): the tasks of the batch and their previous potentials."""
        self.tasks = list(tasks)
        self.batch_size = len(self.tasks)
        self.batch_previous_potentials = []
        for i, task in enumerate(self.tasks):
            prev_potential = self.task_potential_history.get(task, 0.0)
            self.batch_previous_potentials.append(prev_potential)

    def step_reflect(self, subtask_phis, wons):
        """step_reflect(): final_intrinsic_rewards and current_scores (phi) of the batch; updates the history."""
        current_scores = np.zeros(self.batch_size)
        raw_improvements = np.zeros(self.batch_size)
        is_won_array = np.zeros(self.batch_size, dtype=bool)
        for i in range(self.batch_size):
            prev_phi = self.batch_previous_potentials[i]
            actual_success = bool(wons[i])
            is_won_array[i] = actual_success
            subtask_phi = subtask_phis[i]
            if self.potential_based_on_binary_success:
                current_phi = 1.0 if actual_success else 0.0
            else:
                current_phi = subtask_phi
                if actual_success:
                    current_phi = 1.0
            current_scores[i] = current_phi
            improvement = max(0.0, current_phi - prev_phi)
            raw_improvements[i] = improvement

        num_unique_tasks = self.batch_size // self.group_n
        final_intrinsic_rewards = np.zeros(self.batch_size)
        for group_idx in range(num_unique_tasks):
            start_idx = group_idx * self.group_n
            end_idx = start_idx + self.group_n
            task_desc = self.tasks[start_idx]
            group_improvements = raw_improvements[start_idx:end_idx]
            if self.group_relative_intrinsic_rewards:
                group_mean_imp = np.mean(group_improvements)
                centered_improvements = group_improvements - group_mean_imp
                final_intrinsic_rewards[start_idx:end_idx] = centered_improvements
            else:
                final_intrinsic_rewards[start_idx:end_idx] = group_improvements
            group_success_rate = np.mean(is_won_array[start_idx:end_idx].astype(float))
            old_baseline = self.task_potential_history.get(task_desc, 0.0)
            if group_success_rate > old_baseline:
                self.task_potential_history[task_desc] = group_success_rate
        return final_intrinsic_rewards, current_scores


def reflect_rewards(final_intrinsic_rewards, reflection_coeff, instrinsic_rewards_upper_clipping_ratio=-5,
                    instrinsic_rewards_lower_clipping_ratio=-5):
    """rollout_loop.py: the intrinsic reward added to each episode's reward (config defaults -5: no clip)."""
    reflect_rewards = final_intrinsic_rewards * reflection_coeff
    if instrinsic_rewards_upper_clipping_ratio > -1:
        reflect_rewards = np.clip(reflect_rewards, -instrinsic_rewards_lower_clipping_ratio,
                                  instrinsic_rewards_upper_clipping_ratio)
    return reflect_rewards


def update_score_internal(current_avg, new_score, beta=0.1):
    """memory.py `_update_score_internal` (the utility EMA; the count increment is not part of the value)."""
    new_avg = (1 - beta) * current_avg + beta * new_score
    return new_avg


def ucb_final_score(relevance, utility, count, total_system_counts, alpha=0.6, ucb_scale=1.0):
    """memory.py `retrieve`, retrieve_type "ucb": the score of one candidate memory."""
    if total_system_counts < 1:
        total_system_counts = 1
    if count == 0:
        count = 1
    exploration_bonus = ucb_scale * math.sqrt(math.log(total_system_counts) / count)
    ucb_utility = utility + exploration_bonus
    final_score = (alpha * relevance) + ((1 - alpha) * ucb_utility)
    return final_score
