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


TOKEN_REWARD_MODES = ("in_baseline", "to_go")


def split_rewards(batch: RolloutBatch, token_rewards_mode: str) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(R [B] the group baseline sees, per-token term [B, T] added after it, or None).

    "in_baseline" (TRL RLOO, verl `use_kl_in_reward`): R_i + sum_t token_rewards, then the baseline.
    "to_go" (OpenRLHF `compute_reward`): the baseline shapes the outcome R_i alone, and each token then
    adds the reward-to-go sum_{s >= t} token_rewards_s (e.g. -beta * KL).
    """
    if token_rewards_mode not in TOKEN_REWARD_MODES:
        raise ValueError(f"token_rewards_mode must be one of {TOKEN_REWARD_MODES}, got {token_rewards_mode!r}")
    if token_rewards_mode == "in_baseline" or batch.token_rewards is None:
        return sequence_rewards(batch), None
    batch.require("rewards")
    check_rewards(batch.rewards)
    mask = batch.mask.double()
    to_go = (batch.token_rewards.double() * mask).flip(-1).cumsum(-1).flip(-1) * mask
    return batch.rewards.double(), to_go


def check_discounts(**settings) -> None:
    """A recipe's gamma (the discount) and lam (GAE's trace decay), where it sets them, each in [0, 1]: the `check` of
    the estimators whose gamma and lam are these (elsewhere the names mean other things: SimPO's margin, ...)."""
    for name in ("gamma", "lam"):
        value = settings.get(name)
        if value is not None and not 0 <= value <= 1:
            raise ValueError(f"{name} (the {'discount' if name == 'gamma' else 'GAE trace decay'}) must be in "
                             f"[0, 1], got {value}")


def broadcast(per_seq: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-sequence advantage [B] over the response mask -> [B, T] (verl `scores.unsqueeze(-1) * mask`)."""
    return per_seq[:, None].to(mask.dtype) * mask


def with_to_go(advantages: torch.Tensor, to_go: torch.Tensor | None) -> torch.Tensor:
    """Add the per-token reward-to-go of `split_rewards` ("to_go" mode) to broadcast advantages."""
    return advantages if to_go is None else advantages + to_go.to(advantages.dtype)
