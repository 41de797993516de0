"""T-PPO's extended GAE (EGAE) for responses cut at a generation window.

    finished response:   ordinary GAE (terminal value 0 after the last token)
    unfinished response generated up to position l (last policy token l-1):
        unobserved V(s_l) ~= V(s_{l-1}) and reward 0, so delta_{l-1} = r_{l-1} + gamma V(s_{l-1}) - V(s_{l-1})
        A_t = sum_{k=0}^{l-t-1} (gamma lam)^k delta_{t+k}
    gamma = lam = 1, no rewards: A_t = V(s_{l-1}) - V(s_t) (telescoping)

Reading (`partial`, `secondary`/`unverified`: no reference implementation located, arXiv 2506.15050): the
value model is trained only on completed responses (`egae_value_mask`); gamma, lam and the window length
are not known, so `egae` has no defaults; the registered `t-ppo` advantage uses `gae`'s (1.0, 0.95).
"""
from __future__ import annotations

from dataclasses import replace

import torch

from workbench import ops, registry
from workbench.advantages.base import check_discounts, last_token_mask, token_rewards
from workbench.advantages.gae import gae_and_returns
from workbench.batch import RolloutBatch


def egae(token_rewards, values, mask, finished, *, gamma: float, lam: float):
    """(advantages, returns), each [B, T], un-whitened; `finished` [B] bool (EOS inside the window).

    Implemented as `gae_and_returns` on rewards where each unfinished row's last policy token also
    receives the bootstrap gamma V(s_{l-1}): that makes delta_{l-1} = r_{l-1} + gamma V_{l-1} - V_{l-1},
    i.e. V(s_l) := V(s_{l-1}). `token_rewards` are used as given: for unfinished rows they must hold no
    outcome reward (it is unobserved, = 0), only per-token terms such as a KL-in-reward penalty.
    Returns R_t = A_t + V_t of unfinished rows are bootstrapped targets; T-PPO trains the critic only on
    finished rows (mask the value loss with `egae_value_mask`).
    """
    if values.shape != mask.shape or token_rewards.shape != mask.shape:
        raise ValueError(f"token_rewards {tuple(token_rewards.shape)}, values {tuple(values.shape)} and "
                         f"mask {tuple(mask.shape)} must have the same shape")
    finished = torch.as_tensor(finished, dtype=torch.bool)
    if finished.shape != mask.shape[:1]:
        raise ValueError(f"finished must have shape [B]={mask.shape[0]}, got {tuple(finished.shape)}")
    last = last_token_mask(mask).to(values.dtype)
    v_last = (values * last).sum(-1)
    bootstrap = (~finished).to(values.dtype) * gamma * v_last
    rewards = token_rewards + last * bootstrap[:, None]
    return gae_and_returns(rewards, values, mask, gamma, lam)


def egae_value_mask(mask, finished) -> torch.Tensor:
    """[B, T] value-loss mask: the response mask on finished rows, 0 on truncated-unfinished rows."""
    finished = torch.as_tensor(finished, dtype=torch.bool)
    return mask * finished[:, None].to(mask.dtype)


def unfinished_zeroed(batch: RolloutBatch) -> RolloutBatch:
    """The batch with the outcome reward of truncated rows set to 0 (unobserved inside the window)."""
    batch.require("truncated", "rewards", "values")
    return replace(batch, rewards=batch.rewards * (~batch.truncated.bool()).to(batch.rewards.dtype))


def truncated_gae_targets(batch: RolloutBatch, *, gamma=1.0, lam=0.95, whiten=True):
    """Critic targets (returns [B, T], value-loss mask [B, T]): finished responses only."""
    b = unfinished_zeroed(batch)
    finished = ~b.truncated.bool()
    _, returns = egae(token_rewards(b), b.values.double(), b.mask.double(), finished, gamma=gamma, lam=lam)
    return returns.to(batch.mask.dtype), egae_value_mask(batch.mask, finished)


@registry.advantage(
    "t-ppo", title="Truncated Proximal Policy Optimization",
    summary="GAE that bootstraps responses cut at the budget with V(s_l) = V(s_{l-1}) and no outcome reward; "
            "the critic learns only from finished responses.",
    equation=r"\delta_{l-1} = r_{l-1} + \gamma V(s_{l-1}) - V(s_{l-1}),\quad A_t = \sum_k (\gamma\lambda)^k\delta_{t+k}",
    reads=("values", "truncated"), targets=truncated_gae_targets, check=check_discounts)
def truncated_gae(batch: RolloutBatch, *, gamma=1.0, lam=0.95, whiten=True):
    """EGAE advantages; reads `rewards`/`token_rewards`, `values`, `truncated` (unfinished = truncated), `mask`.

    gamma/lam defaults follow `gae` (the paper's values are unknown).
    """
    b = unfinished_zeroed(batch)
    mask = b.mask.double()
    adv, _ = egae(token_rewards(b), b.values.double(), mask, ~b.truncated.bool(), gamma=gamma, lam=lam)
    return (ops.masked_whiten(adv, mask) if whiten else adv).to(batch.mask.dtype)
