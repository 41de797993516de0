"""REINFORCE++: discounted token returns, whitened over every valid token of the batch (no groups)."""
from __future__ import annotations

import torch

from workbench import ops, registry
from workbench.advantages.base import check_discounts, token_rewards
from workbench.batch import RolloutBatch


def discounted_returns(token_rewards: torch.Tensor, mask: torch.Tensor, gamma: float) -> torch.Tensor:
    """G_t = r_t + gamma * G_{t+1} over valid tokens (masked positions are skipped, not zeroed into)."""
    returns = torch.zeros_like(token_rewards)
    running = torch.zeros(token_rewards.shape[0], dtype=token_rewards.dtype)
    for t in reversed(range(token_rewards.shape[1])):
        m = mask[:, t].to(token_rewards.dtype)
        running = m * (token_rewards[:, t] + gamma * running) + (1 - m) * running
        returns[:, t] = running
    return returns * mask


@registry.advantage(
    "reinforce_plus_plus",
    title="REINFORCE++: A Simple and Efficient Approach for Aligning Large Language Models",
    summary="Discounted return per token, whitened over all valid tokens of the batch.",
    equation=r"G_t = r_t + \gamma G_{t+1},\quad A = \mathrm{whiten}_{\text{batch tokens}}(G)", check=check_discounts)
def reinforce_plus_plus(batch: RolloutBatch, *, gamma=1.0, unbiased=True, eps=1e-8):
    """Reads `rewards` and/or `token_rewards`, `mask`. verl: Bessel variance; OpenRLHF: population."""
    mask = batch.mask.double()
    returns = discounted_returns(token_rewards(batch), mask, gamma)
    return ops.masked_whiten(returns, mask, unbiased=unbiased, eps=eps).to(batch.mask.dtype)
