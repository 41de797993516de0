"""Generalized advantage estimation with a critic, and its (un-whitened) value targets."""
from __future__ import annotations

import torch

from workbench import ops, registry
from workbench.advantages.base import check_discounts, token_rewards
from workbench.batch import RolloutBatch


def gae_and_returns(token_rewards, values, mask, gamma, lam):
    """delta_t = r_t + gamma V_{t+1} - V_t;  A_t = delta_t + gamma lam A_{t+1};  R_t = A_t + V_t.

    Positions with mask 0 (padding, observation tokens) are skipped: the recursion carries the next
    valid token's value and advantage across them (verl `nextvalues`/`lastgaelam`).
    `gamma` and `lam` are floats, or [B, T] tensors giving each position its own gamma_t / lam_t (the discount
    and trace from t to the next valid position: POAD's 1 inside an action, HiPER's lam_t = 0 at a window's end).
    """
    B, T = mask.shape
    adv = torch.zeros_like(token_rewards)
    next_value = torch.zeros(B, dtype=token_rewards.dtype, device=token_rewards.device)
    next_adv = torch.zeros(B, dtype=token_rewards.dtype, device=token_rewards.device)
    for t in reversed(range(T)):
        m = mask[:, t]
        g = gamma[:, t] if isinstance(gamma, torch.Tensor) else gamma
        k = lam[:, t] if isinstance(lam, torch.Tensor) else lam
        delta = token_rewards[:, t] + g * next_value - values[:, t]
        a = delta + g * k * next_adv
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
    reads=("values",), targets=gae_targets, check=check_discounts)
def gae(batch: RolloutBatch, *, gamma=1.0, lam=0.95, whiten=True):
    """Reads `rewards`/`token_rewards`, `values` (rollout-time critic), `mask`. TRL PPO: gamma 1, lam 0.95."""
    batch.require("values")
    mask = batch.mask.double()
    adv, _ = gae_and_returns(token_rewards(batch), batch.values.double(), mask, gamma, lam)
    adv = ops.masked_whiten(adv, mask) if whiten else adv
    return adv.to(batch.mask.dtype)
