"""HGPO: hierarchy-of-groups step advantages (nested groups of steps with the same recent history).

    G_{i,s}   = sum_k gamma^k r_{i,s+k}                         discounted step return (as `gigpo`)
    H_k(i, s) = (s_{i,s-k+1}, ..., s_{i,s})                     the step's last k observations, k = 1..min(K+1, s+1)
    group G_k(i, s) = every step (j, u) of the same prompt group with H_k(j, u) = H_k(i, s)
    a_k(i, s) = (G_{i,s} - mean_{G_k} G) / (std_{G_k} G + eps)  ("mean_std_norm"; "mean_norm": G - mean);
                0 for a group of one step
    A(i, s)   = sum_k w_k a_k / sum_k w_k,   w_k = (k + 1)^alpha, over the step's levels with a_k != 0
                (optional base level k = 0: the episode's group advantage A_E, weight 1)
    A_{i,t}   = A(i, turn_{i,t})                                on the policy tokens of step s

Steps that acted from the same state after different histories are different prompts ("context inconsistency");
deeper groups match more of the history (less bias) but hold fewer steps (more variance); the weights favour the
deeper ones (alpha = `length_weight_alpha` = 1; alpha = 0 weighs the levels equally). There is no separate episode
term: the step advantage is the whole advantage unless `base_group` adds A_E as level 0. With K = 0 and no base
group the only level is the current state, and A is GiGPO's step advantage A_S (same std convention).

Reading (`exact`): the observations are the anchor states the multi-turn rollout records
(`batch.turn_info[i][s]["state"]`, the state step s acted from), keyed exactly (a revisited state joins the same
group, also within one trajectory); step rewards are `batch.turn_rewards` (the env's per-step rewards). The std is
the population std (`unbiased=False`), as the authors' step groups; the base group is `grpo` (Bessel), with one
sample per trajectory (`episode_stats="trajectory"`; "steps": one sample per step, as the authors' code).
Defaults from the authors' ALFWorld script: K = `history_length` = 2 (2 or 4 in the paper), gamma 0.95,
mode "mean_std_norm", alpha 1, base_group False, eps 1e-6.

Authors' code: zzj1111/alfworldauto @ 37aec78 (a mirror of langfengQ/verl-agent's recipe)
`recipe/hgpo/core_hgpo.py::hgpo_advantage_estimate` (+ `aggregate_items`, `trajectory_advantages`,
`compute_step_discounted_returns`), transcribed in tests/anchors/formulas_hgpo.py. `reference_bug=True` reproduces
what differs there: the weights are normalized as w / (sum w + eps), so even a single level is scaled by
(k+1)^alpha / ((k+1)^alpha + eps), and the base group is computed over one sample per step
(`compute_mean_std_cross_steps=True`) whatever `episode_stats` says.
"""
from __future__ import annotations

import torch

from workbench import registry
from workbench.advantages.base import check_discounts
from workbench.advantages.gigpo import (
    EPISODE_STATS,
    MODES,
    episode_advantage,
    per_token,
    step_counts,
    step_returns,
    step_rewards_of,
)
from workbench.advantages.group import keyed_normalize
from workbench.batch import RolloutBatch

TITLE = "Hierarchy-of-Groups Policy Optimization for Long-Horizon Agentic Tasks"


def history_key(states_row: list, s: int, k: int) -> tuple:
    """H_k: the last k observations of step s (the current state last)."""
    return tuple(states_row[s - k + 1:s + 1])


def level_advantages(returns: torch.Tensor, states, group: torch.Tensor, k: int, *, mode="mean_std_norm",
                     eps=1e-6, unbiased=False) -> torch.Tensor:
    """[B, S] a_k: each step's return normalized in its depth-k history group (steps with s + 1 >= k, same prompt
    group); 0 for a group of one step and for steps with fewer than k observations."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    out = torch.zeros_like(returns)
    members = [(i, s) for i, row in enumerate(states) for s in range(k - 1, len(row))]
    if not members:
        return out
    keys = []
    for i, s in members:
        key = (int(group[i]), history_key(states[i], s, k))
        try:
            hash(key)
        except TypeError:
            raise TypeError(f"hgpo: state of row {i} near step {s} is not hashable; pass hashable observations, "
                            "e.g. tuple(obs) or the observation text") from None
        keys.append(key)
    rows, steps = torch.tensor([m[0] for m in members]), torch.tensor([m[1] for m in members])
    out[rows, steps] = keyed_normalize(returns[rows, steps], keys, scale=mode == "mean_std_norm", eps=eps,
                                       singletons="zero", unbiased=unbiased)
    return out


def weighted_levels(levels: torch.Tensor, depths: list[int], alpha: float, weight_eps: float = 0.0) -> torch.Tensor:
    """[B, S] sum_k w_k a_k / (sum_k w_k + weight_eps) over the levels with a_k != 0, w_k = (k + 1)^alpha.

    levels: [L, B, S] a_k for the depths `depths` (0 = the base group). A step with no non-zero level gets 0."""
    weights = (torch.tensor(depths, dtype=levels.dtype) + 1.0) ** alpha          # [L]
    w = weights[:, None, None] * (levels != 0)                                   # [L, B, S]
    total = w.sum(0)
    aggregate = (w * levels).sum(0) / (total + weight_eps).clamp(min=torch.finfo(levels.dtype).tiny)
    return torch.where(total > 0, aggregate, torch.zeros_like(aggregate))


def check_hgpo(*, history_length=2, **settings) -> None:
    if history_length < 0 or int(history_length) != history_length:
        raise ValueError(f"history_length must be an integer >= 0 (K; depths 1..K+1), got {history_length}")
    check_discounts(**settings)


def hgpo_step_advantages(returns: torch.Tensor, states, group: torch.Tensor, *, history_length=2,
                         length_weight_alpha=1.0, mode="mean_std_norm", eps=1e-6, unbiased=False,
                         base=None, weight_eps=0.0) -> torch.Tensor:
    """[B, S] A(i, s) from step returns [B, S], observations states[i][s] and prompt groups [B].

    base: None, or [B] the episode advantage A_E added as level 0 to every step of its row."""
    check_hgpo(history_length=history_length)
    depths = list(range(1, int(history_length) + 2))
    levels = [level_advantages(returns, states, group, k, mode=mode, eps=eps, unbiased=unbiased) for k in depths]
    if base is not None:
        n_steps = torch.tensor([len(row) for row in states])
        in_row = torch.arange(returns.shape[1])[None, :] < n_steps[:, None]
        levels.insert(0, torch.where(in_row, base.to(returns.dtype)[:, None], torch.zeros_like(returns)))
        depths.insert(0, 0)
    return weighted_levels(torch.stack(levels), depths, length_weight_alpha, weight_eps)


@registry.advantage(
    "hgpo", title=TITLE,
    summary="Step returns normalized in nested groups of steps sharing their last k observations (k = 1..K+1) "
            "within the prompt group, averaged with weights (k+1)^alpha over the non-zero levels.",
    equation=r"A_{i,s} = \frac{\sum_{k} (k+1)^{\alpha} a_k(i,s)}{\sum_{k:\,a_k \ne 0} (k+1)^{\alpha}},\ "
             r"a_k = \frac{G_{i,s} - \mathrm{mean}_{\mathcal{G}_k(i,s)} G}{\mathrm{std}_{\mathcal{G}_k(i,s)} G}",
    reads=("turn", "turn_info"), needs=("multi_turn",), choices={"mode": MODES, "episode_stats": EPISODE_STATS},
    check=check_hgpo)
def hgpo(batch: RolloutBatch, *, history_length=2, length_weight_alpha=1.0, gamma=0.95, mode="mean_std_norm",
         base_group=False, eps=1e-6, unbiased=False, episode_stats="trajectory", allow_singletons=False,
         reference_bug=False, states=None, step_rewards=None):
    """HGPO advantage [B, T]. Reads `turn`, `mask`, `group`, and, unless `states` is passed, `turn_info` (anchor
    states) and `turn_rewards` (per-step rewards); `rewards` for the base group and when there are no step rewards.

    history_length: K, the most previous observations a group matches (levels k = 1..K+1).
    length_weight_alpha: alpha in w_k = (k+1)^alpha. mode: "mean_std_norm" or "mean_norm". unbiased: Bessel std in
    the step groups (False: population, the authors'). base_group: add the episode advantage A_E (`grpo` over the
    prompt group, `episode_stats` "trajectory" or "steps") as level 0. states / step_rewards: as `gigpo` (per row,
    the hashable observation of every step; [B, S] rewards, None: the outcome on the last step).
    reference_bug: the authors' weight normalization w / (sum w + eps) and steps-weighted base group.
    allow_singletons: a prompt with one trajectory, read by the base group only (`gigpo`'s A_E: False refuses, True
    0, "keep" verl-agent's mean 0 / std 1 rule); the step levels give a group of one step 0 by design.
    """
    if states is None:
        if not batch.turn_info:
            raise ValueError("hgpo needs each step's observation: sample with the multi-turn rollout (batch.turn_info) "
                             "or pass states=[[state per step] per row]")
        states = [[info["state"] for info in row] for row in batch.turn_info]
        if step_rewards is None:
            step_rewards = batch.turn_rewards
    n_steps = step_counts(states, batch.size, "states")
    returns = step_returns(step_rewards_of(batch, n_steps, step_rewards), n_steps, gamma)
    base = None
    if base_group:
        base = episode_advantage(batch, n_steps, mode=mode, eps=eps, allow_singletons=allow_singletons,
                                 episode_stats="steps" if reference_bug else episode_stats)
    a_step = hgpo_step_advantages(returns, states, batch.group, history_length=history_length,
                                  length_weight_alpha=length_weight_alpha, mode=mode, eps=eps, unbiased=unbiased,
                                  base=base, weight_eps=eps if reference_bug else 0.0)
    return per_token(a_step, batch, n_steps, "hgpo")
