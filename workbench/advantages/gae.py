"""Generalized advantage estimation with a critic, and its (un-whitened) value targets."""
from __future__ import annotations

import torch

from workbench import ops, registry
from workbench.advantages.base import token_rewards
from workbench.batch import RolloutBatch


def gae_and_returns(token_rewards, values, mask, gamma: float, lam: float):
    """delta_t = r_t + gamma V_{t+1} - V_t;  A_t = delta_t + gamma lam A_{t+1};  R_t = A_t + V_t.

    Positions with mask 0 (padding, observation tokens) are skipped: the recursion carries the next
    valid token's value and advantage across them (verl `nextvalues`/`lastgaelam`).
    """
    B, T = mask.shape
    adv = torch.zeros_like(token_rewards)
    next_value = torch.zeros(B, dtype=token_rewards.dtype)
    next_adv = torch.zeros(B, dtype=token_rewards.dtype)
    for t in reversed(range(T)):
        m = mask[:, t]
        delta = token_rewards[:, t] + gamma * next_value - values[:, t]
        a = delta + gamma * lam * next_adv
        next_adv = m * a + (1 - m) * next_adv
        next_value = m * values[:, t] + (1 - m) * next_value
        adv[:, t] = a
    return adv * mask, (adv + values) * mask


def gae_returns(batch: RolloutBatch, *, gamma=1.0, lam=0.95) -> torch.Tensor:
    """Value targets R_t = A_t + V_t (before whitening), for the clipped value loss."""
    batch.require("values")
    mask = batch.mask.double()
    _, returns = gae_and_returns(token_rewards(batch), batch.values.double(), mask, gamma, lam)
    return returns.to(batch.mask.dtype)


def gae_targets(batch: RolloutBatch, *, gamma=1.0, lam=0.95, whiten=True):
    """Critic targets (returns [B, T], value-loss mask [B, T]) for the clipped value loss."""
    return gae_returns(batch, gamma=gamma, lam=lam), batch.mask


@registry.advantage(
    "gae", title="High-Dimensional Continuous Control Using Generalized Advantage Estimation",
    summary="TD(lambda) advantages from a critic, whitened over the batch's valid tokens.",
    equation=r"\delta_t = r_t + \gamma V_{t+1} - V_t,\quad A_t = \sum_k (\gamma\lambda)^k \delta_{t+k}",
    reads=("values",), targets=gae_targets)
def gae(batch: RolloutBatch, *, gamma=1.0, lam=0.95, whiten=True):
    """Reads `rewards`/`token_rewards`, `values` (rollout-time critic), `mask`. TRL PPO: gamma 1, lam 0.95."""
    batch.require("values")
    mask = batch.mask.double()
    adv, _ = gae_and_returns(token_rewards(batch), batch.values.double(), mask, gamma, lam)
    adv = ops.masked_whiten(adv, mask) if whiten else adv
    return adv.to(batch.mask.dtype)
