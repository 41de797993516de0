"""What every advantage estimator reads from a batch: checked outcome rewards and token rewards."""
from __future__ import annotations

import torch

from workbench.batch import RolloutBatch


def check_rewards(rewards: torch.Tensor) -> None:
    bad = torch.nonzero(~torch.isfinite(rewards)).flatten().tolist()
    if bad:
        raise ValueError(f"rewards must be finite; rows {bad[:10]} are NaN/inf (fix the reward function)")


def last_token_mask(mask: torch.Tensor) -> torch.Tensor:
    """[B, T] bool, True at each row's last policy token."""
    reached = (mask.cumsum(-1) == mask.sum(-1, keepdim=True)) & (mask > 0)
    return reached & (reached.long().cumsum(-1) == 1)


def token_rewards(batch: RolloutBatch) -> torch.Tensor:
    """[B, T] float64: the outcome reward on the last policy token plus `token_rewards` (e.g. -beta * KL)."""
    out = torch.zeros(batch.mask.shape, dtype=torch.float64)
    if batch.rewards is not None:
        check_rewards(batch.rewards)
        out = out + last_token_mask(batch.mask).double() * batch.rewards.double()[:, None]
    if batch.token_rewards is not None:
        out = out + batch.token_rewards.double() * batch.mask
    return out


def sequence_rewards(batch: RolloutBatch) -> torch.Tensor:
    """[B] float64: outcome reward plus the summed token rewards (TRL RLOO's R - beta * sum_t k1)."""
    batch.require("rewards")
    check_rewards(batch.rewards)
    out = batch.rewards.double()
    if batch.token_rewards is not None:
        out = out + (batch.token_rewards.double() * batch.mask).sum(-1)
    return out


def broadcast(per_seq: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-sequence advantage [B] over the response mask -> [B, T] (verl `scores.unsqueeze(-1) * mask`)."""
    return per_seq[:, None].to(mask.dtype) * mask
