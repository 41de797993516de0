"""T-PPO's extended GAE (EGAE) for responses cut at a generation window.

    finished response:   ordinary GAE (terminal value 0 after the last token)
    unfinished response generated up to position l (last policy token l-1):
        unobserved V(s_l) ~= V(s_{l-1}) and reward 0, so delta_{l-1} = r_{l-1} + gamma V(s_{l-1}) - V(s_{l-1})
        A_t = sum_{k=0}^{l-t-1} (gamma lam)^k delta_{t+k}
    gamma = lam = 1, no rewards: A_t = V(s_{l-1}) - V(s_t) (telescoping)

Reading (`partial`, `secondary`/`unverified`: no reference implementation located, arXiv 2506.15050): the
value model is trained only on completed responses (`egae_value_mask`); gamma, lam and the window length
are not known, so they have no defaults. `t-ppo` is a recipe key in the catalog: these are plain functions.
"""
from __future__ import annotations

import torch

from workbench.advantages.base import last_token_mask
from workbench.advantages.gae import gae_and_returns


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
