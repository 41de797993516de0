"""AEPO-arbitrary's advantage override: the rows re-sampled at the target temperature train with A = 1.

    A'_{i,t} = 1   if row i was re-sampled (batch.resampled)      positive-only REINFORCE on correct samples
             = A_{i,t} otherwise                                   the GRPO advantage before it in the chain

Reference: 597358816/AEPO `verl/trainer/ray_trainer.py` L803, `entropy_controller.batch["advantages"] =
torch.ones_like(...)`; the rows come from `group_transform:aepo-arbitrary` (workbench/transforms/aepo_resample.py).
"""
from __future__ import annotations

import torch

from workbench import registry

AEPO_TITLE = "Arbitrary Entropy Policy Optimization: Entropy Is Controllable in Reinforcement Fine-tuning"


@registry.advantage(
    "aepo-arbitrary", title=AEPO_TITLE,
    summary="After grpo in the chain: the rows the aepo-arbitrary transform re-sampled at the target temperature "
            "get advantage exactly 1, the others keep theirs.",
    equation=r"A'_{i,t} = \begin{cases} 1 & i \text{ re-sampled at } T \\ A_{i,t} & \text{otherwise} \end{cases}",
    reads=("advantages", "resampled"))
def aepo_override(batch):
    """Reads `advantages`, `resampled` ([B] bool) and `mask`. 1 on the re-sampled rows' valid tokens (the reference
    sets the whole row, padding included; padding is outside every loss), the other rows unchanged."""
    batch.require("advantages", "resampled")
    if batch.resampled.shape != (batch.size,):
        raise ValueError(f"resampled must be a [B] = [{batch.size}] bool mask, got shape "
                         f"{tuple(batch.resampled.shape)}")
    ones = batch.mask.to(batch.advantages.dtype)  # [B, T] 1 on valid tokens
    return torch.where(batch.resampled.bool()[:, None], ones, batch.advantages)
