"""Re-derivation of Dr. MAS's agent-wise GRPO advantage, for tests/anchors/test_dr_mas.py.

Transcribed from langfengQ/DrMAS @ 19c632bc0f75730b6db98d90b5035ee9bb7f66d1:
  - `verl/trainer/ppo/core_algos.py::compute_grpo_outcome_advantage` (L498-568), variable names and order of operations
    kept; the print removed.
  - `verl/trainer/ppo/ray_trainer.py::compute_advantage` L266-271: the group index, f"{uid}_{agent_id}" when
    `group_by_agent_id`, else the uid (`group_index` below).
Rows are the authors' rows: one per agent invocation, each holding that invocation's response and (the
`EpisodeRewardManager`'s) episode reward on its last token; `index` the group index, `traj_index` the trajectory uid.
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np
import torch


def group_index(uid, agent_id, group_by_agent_id):
    if group_by_agent_id:
        return np.array([f"{u}_{a}" for u, a in zip(uid, agent_id)], dtype=object)
    return uid


def compute_grpo_outcome_advantage(token_level_rewards, response_mask, index, traj_index, epsilon=1e-6,
                                   norm_adv_by_std_in_grpo=True, group_by_agent_id=False):
    scores = token_level_rewards.sum(dim=-1)

    id2score = defaultdict(list)
    id2mean = {}
    id2std = {}
    traj_accumulator = defaultdict(list)
    traj2avg = {}
    with torch.no_grad():
        bsz = scores.shape[0]
        for i in range(bsz):
            traj_accumulator[(index[i], traj_index[i])].append(scores[i])

        for (idx, t_idx), reward_list in traj_accumulator.items():
            if group_by_agent_id:
                id2score[idx].extend(reward_list)
            else:
                avg_score = torch.stack(reward_list).mean()
                traj2avg[(idx, t_idx)] = avg_score
                id2score[idx].append(avg_score)
        if not group_by_agent_id:
            for i in range(bsz):
                scores[i] = traj2avg[(index[i], traj_index[i])]

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
