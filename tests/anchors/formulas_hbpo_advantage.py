"""HBPO's advantage transcribed from ZJU-REAL/HBPO @ 5c8991d66483202d8c30b6f76e2aff7a7d561351 (used by
tests/anchors/test_hbpo_advantage.py): `verl/trainer/ppo/core_algos.py::compute_grpo_outcome_advantage`
(L107-197), copied by hand with the code's names and order of operations (its commented-out blank lines dropped).

As released it cannot run: `budget.sum(dim=-1)` wants a per-token [bs, L] budget while `budget[i].item()` wants
one number per row. A [bs, 1] budget tensor satisfies both, which is how the tests call it. Its A_intra is added
twice for groups of more than one row (`scores[i] = scores[i] + aintra` inside the dict branch, then again after the
if/else); a one-row group adds the previous row's `aintra` (undefined on the first row).
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np
import torch


def compute_grpo_outcome_advantage(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: np.ndarray,
                                   budget: torch.Tensor, epsilon: float = 1e-6):
    scores = token_level_rewards.sum(dim=-1)
    budgets = budget.sum(dim=-1)

    id2score = defaultdict(list)
    id2budget = defaultdict(list)
    id2mean = {}
    id2std = {}
    id2aintra = {}

    with torch.no_grad():
        bsz = scores.shape[0]
        for i in range(bsz):
            id2score[index[i]].append(scores[i])
            id2budget[index[i]].append(budgets[i])
        for idx in id2score:
            if len(id2score[idx]) == 1:
                id2mean[idx] = torch.tensor(0.0)
                id2std[idx] = torch.tensor(1.0)
                id2aintra[idx] = torch.tensor(0.0)
            elif len(id2score[idx]) > 1:
                id2mean[idx] = torch.mean(torch.tensor(id2score[idx]))
                id2std[idx] = torch.std(torch.tensor([id2score[idx]]))
                PI_APPROX = 3.1416

                budgets = torch.stack(id2budget[idx])
                scores_list = torch.stack(id2score[idx])

                budget_to_submean = {}
                unique_budgets = torch.unique(budgets)

                for budget_val in unique_budgets:
                    mask = (budgets == budget_val)
                    same_budget_scores = scores_list[mask]
                    budget_to_submean[budget_val.item()] = torch.mean(same_budget_scores)

                id2aintra[idx] = budget_to_submean
            else:
                raise ValueError(f"no score in prompt index: {idx}")
        for i in range(bsz):
            scores[i] = (scores[i] - id2mean[index[i]]) / (id2std[index[i]] + epsilon)

            if isinstance(id2aintra[index[i]], dict):
                current_budget = budget[i].item()
                submean = id2aintra[index[i]][current_budget]
                PI_APPROX = 3.1416
                aintra = submean - 4 * torch.cos(torch.tensor(PI_APPROX * current_budget / 8192))
                scores[i] = scores[i] + aintra
            else:
                scores[i] = scores[i] + id2aintra[index[i]]
            scores[i] = scores[i] + aintra

        scores = scores.unsqueeze(-1) * response_mask

    return scores, scores
