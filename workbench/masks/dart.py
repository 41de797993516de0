"""DART's entropy filter: train only on the trajectories of highest mean token entropy.

    H_i = sum_t m_it H_it / sum_t m_it          mean full-vocabulary entropy of trajectory i under pi_old
    k   = floor(entropy_filter * N)              N rows of the batch (0: no filter)
    keep the k rows of largest H_i; the others' masks are zeroed

The entropies are the old policy's, from the forward pass after the rollout: a token mask runs after it (and after the
advantage), and a mask that reads `entropy` makes the trainer run that pass, so this sees real entropies (no surrogate
from the behaviour log-probs is needed). The advantages are computed on the whole groups first, as in the reference,
where the filter sits after the old-log-prob pass and before the update. Ties: `torch.topk`'s choice; every kept row has
H >= every dropped row's.

Decisions: the mean is over the row's valid tokens (the reference's `entropys.mean(dim=1)` also averages the padding
positions); the filter acts on each rank's share of the step under data parallelism (the reference filters the whole
batch on its driver). entropy_filter = 0.5 is the card's.

Reference: Computer-use-agents/dart-gui @ e0e606d3, `verl/trainer/ppo/ray_trainer_async.py` (the commented-out
`entropy_filter` block after `compute_log_prob`: `traj_entropy = entropys.mean(dim=1)`, `k = int(ratio * N)`,
`torch.topk`).
"""
from __future__ import annotations

import torch

from workbench import ops, registry
from workbench.batch import RolloutBatch

DART_TITLE = "Efficient Multi-turn RL for GUI Agents via Decoupled Training and Adaptive Data Curation"

DART_MASK_LOGS = {
    "filtered_frac/dart": ("DART: share of rollouts masked out by the entropy filter (the lowest mean-entropy ones).",
                           "1 - entropy_filter (0.5) on every step, a little less when some rows were already "
                           "empty; it does not track learning."),
}


def check_entropy_filter(*, entropy_filter=0.5, **_) -> None:
    if isinstance(entropy_filter, bool) or not isinstance(entropy_filter, (int, float)) or not 0 < entropy_filter <= 1:
        raise ValueError(f"entropy_filter={entropy_filter!r}: the share of trajectories kept must be in (0, 1] (the "
                         "card's 0.5; 1 keeps every trajectory)")


def trajectory_entropy(entropy: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[B] mean token entropy of each row over its valid tokens (0 for an empty row)."""
    return ops.masked_sum(entropy, mask, -1) / mask.sum(-1).clamp(min=1)


def top_rows(scores: torch.Tensor, keep_frac: float) -> torch.Tensor:
    """[B] bool: the k = floor(keep_frac * B) rows of largest score (every row when k = 0, as the reference skips)."""
    k = int(keep_frac * scores.shape[0])
    if k == 0:
        return torch.ones_like(scores, dtype=torch.bool)
    kept = torch.zeros_like(scores, dtype=torch.bool)
    kept[torch.topk(scores, k).indices] = True
    return kept


@registry.token_mask(
    "dart", title=DART_TITLE,
    summary="Entropy filter: keep the top entropy_filter (0.5) of the batch's trajectories by mean token entropy "
            "under the old policy; the others leave the update.",
    equation=r"m_{i,\cdot} \leftarrow 0 \text{ unless } \bar H_i \text{ is among the } "
             r"\lfloor \rho N \rfloor \text{ largest},\ \bar H_i = \tfrac{\sum_t m_{it} H_{it}}{\sum_t m_{it}}",
    reads=("entropy",), logs=DART_MASK_LOGS, check=check_entropy_filter)
def dart_entropy_filter(batch: RolloutBatch, *, entropy_filter=0.5) -> torch.Tensor:
    """Reads `mask`, `entropy` (the old policy's); returns the mask [B, T] with the low-entropy rows zeroed."""
    check_entropy_filter(entropy_filter=entropy_filter)
    batch.require("entropy")
    kept = top_rows(trajectory_entropy(batch.entropy.detach(), batch.mask), entropy_filter)
    return batch.mask * kept[:, None].to(batch.mask.dtype)
