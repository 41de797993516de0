"""R³L's Pivotal Credit Assignment: a base episode and its retry share their turns before the pivot; neither trains on
them.

    mask'_{i,t} = mask_{i,t} * [turn_{i,t} >= k_pivot(i)]

k_pivot(i) is recorded by `rollout:r3l` in the row's turn_info ("pivot"): the retried base episode's pivot for the
base row and for its retry, 0 (nothing masked) for a base episode that was not retried. The retry's prefix is
replayed (mask 0 already); the base row's prefix is the same actions, sampled once. Identical in both trajectories,
the prefix cannot tell the failed path from the corrected one: trained, it only adds the failure's penalty (or the
success's credit) to actions that did not decide the outcome. Only the diverging suffix is trained.

Reference: shiweijiezero/R3L @ d503f6c6b0725a4e8a39311e6f9b71de6bb2f64b,
`trinity/common/workflows/envs/R3L/alfworld/R3L_workflow.py::R3LAlfworldWorkflow._adjust_action_mask_for_retry`
(L149-188: the first `retry_step` assistant segments of the action mask set to 0), applied to the second attempt
and to the first (L272-278) and to the guided retry (L333-335). Paper: mask_k^t = 0 if k < k_pivot, else 1
(shiweijiezero/Trinity-RFT `writing/ARR_EMNLP_R3L/paper_arxiv/main.tex`, "Pivotal Credit Assignment").

Differences: the reference counts assistant segments of the action mask (contiguous runs of 1), here the turn ids of
the multi-turn layout (`turn`), which name the same turns and do not merge two turns whose tokens touch.
"""
from __future__ import annotations

import torch

from workbench import registry
from workbench.batch import RolloutBatch
from workbench.advantages.r3l import R3L_TITLE, row_pivot

PIVOTAL_CREDIT_LOGS = {
    "filtered_frac/r3l": ("Share of rollouts left with no trained token by the pivot mask.",
                          "0: a pivot is always before a failed episode's last turn, so every row keeps a turn."),
}


def pivots(batch: RolloutBatch) -> torch.Tensor:
    """[B] long: each row's k_pivot from its turn_info (0 for rows of another rollout)."""
    return torch.tensor([row_pivot(steps) for steps in batch.turn_info] if batch.turn_info else [0] * batch.size,
                        dtype=torch.long, device=batch.mask.device)


@registry.token_mask(
    "r3l", title=R3L_TITLE,
    summary="Pivotal credit: zero the mask on the turns before the pivot, in a retried base episode and its retry "
            "(the shared prefix); the diverging suffix keeps its tokens.",
    equation=r"m'_{k,t} = m_{k,t}\,[k \ge k_{pivot}]", reads=("turn", "turn_info"), logs=PIVOTAL_CREDIT_LOGS)
def pivotal_credit(batch: RolloutBatch) -> torch.Tensor:
    """Reads `mask`, `turn` [B, T] and the rows' pivots in `turn_info` (`rollout:r3l`); returns the mask [B, T] with
    turns k < k_pivot zeroed."""
    batch.require("turn")
    keep = batch.turn >= pivots(batch)[:, None]  # [B, T]; padding (turn -1) is outside the mask already
    return batch.mask * keep.to(batch.mask.dtype)
