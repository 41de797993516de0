"""Token masks that decide which response tokens are trained on."""
from __future__ import annotations

import torch

from workbench import registry
from workbench.batch import RolloutBatch


@registry.data(
    "overlong-filter", title="DAPO: An Open-Source LLM Reinforcement Learning System at Scale",
    summary="Zero the mask of responses truncated at max_new_tokens (no EOS): no reward noise from cut-offs.",
    equation=r"m_{i,\cdot} \leftarrow 0 \text{ if } y_i \text{ has no EOS}")
def overlong_filter(batch: RolloutBatch) -> torch.Tensor:
    """Reads `mask`, `truncated`; returns the mask [B, T] with truncated rows zeroed.

    The filtered rows also leave global token-mean denominators (they are not counted), the choice
    TRL's `mask_truncated_completions` makes.
    """
    batch.require("truncated")
    return batch.mask * (~batch.truncated.bool())[:, None].to(batch.mask.dtype)
