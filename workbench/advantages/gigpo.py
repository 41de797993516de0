"""GiGPO: group-in-group advantages for multi-step agents (episode group + anchor-state step groups).

    A_E(i)    = (R_i - mean_g R) / (std_g R + eps)           episode advantage (= `grpo`), or R_i - mean_g R
    G_{i,s}   = sum_k gamma^k r_{i,s+k}                       discounted step return of step s
    anchor group = all steps (j, u) of the same prompt group whose environment state s_{j,u} equals s_{i,s}
    A_S(i, s) = (G_{i,s} - mean_anchor G) / (std_anchor G + eps)   (0 for an anchor group of one step)
    A_{i,t}   = A_E(i) + omega A_S(i, turn_{i,t})              on the policy tokens of step s

Reading (`partial`, `unverified` against the paper; matches langfengQ/verl-agent `gigpo/core_gigpo.py`:
`episode_norm_reward`, `build_step_group` with exact-match states, `step_norm_reward`,
`compute_step_discounted_returns`, `scores = episode_advantages + step_advantage_w * step_advantages`).
One batch row is a whole trajectory here (verl-agent stores one row per step). The anchor states and step
rewards come from the multi-turn rollout (`batch.turn_info[i][s]["state"]`, `batch.turn_rewards`) unless passed.
"""
from __future__ import annotations

import warnings
from collections import defaultdict

import torch

from workbench import registry
from workbench.advantages.base import check_discounts, check_rewards, sequence_rewards
from workbench.advantages.group import check_group_sizes, grpo, keyed_normalize
from workbench.batch import RolloutBatch

MODES = ("mean_std_norm", "mean_norm")  # (G - mean) / (std + eps), or G - mean
EPISODE_STATS = ("trajectory", "steps")  # the episode term's samples: one per trajectory, or one per step


def step_returns(step_rewards: torch.Tensor, n_steps: list[int], gamma: float) -> torch.Tensor:
    """[B, S] G_{i,s} = r_{i,s} + gamma G_{i,s+1} over each row's first n_steps[i] steps (0 beyond)."""
    B, S = step_rewards.shape
    out = torch.zeros(B, S, dtype=torch.float64)
    for i, n in enumerate(n_steps):
        running = 0.0
        for s in reversed(range(n)):
            running = float(step_rewards[i, s]) + gamma * running
            out[i, s] = running
    return out


def step_counts(per_step: list, rows: int, name: str) -> list[int]:
    """n_i, the number of steps of every row, from a per-row list of per-step entries (anchor states, expert
    matches), checked against the batch's `rows`."""
    if len(per_step) != rows:
        raise ValueError(f"{name} has {len(per_step)} rows but the batch has {rows}")
    n_steps = [len(row) for row in per_step]
    if min(n_steps) < 1:
        raise ValueError(f"every row needs at least one step in `{name}`")
    return n_steps


def anchor_groups(states, group: torch.Tensor) -> dict:
    """{(prompt group, state): [(row, step), ...]} over every step of every row."""
    clusters = defaultdict(list)
    for i, row in enumerate(states):
        for s, state in enumerate(row):
            try:
                key = (int(group[i]), state)
                hash(key)
            except TypeError:
                raise TypeError(f"gigpo: state of row {i} step {s} is not hashable ({type(state).__name__}); "
                                "pass hashable anchor states, e.g. tuple(obs) or the observation text") from None
            clusters[key].append((i, s))
    return clusters


def step_advantages(returns: torch.Tensor, states, group: torch.Tensor, *, mode="mean_std_norm",
                    eps=1e-6) -> torch.Tensor:
    """[B, S] A_S(i, s): the step return normalized inside its anchor-state group (0 beyond a row's steps).

    mean_std_norm: (G - mean) / (std + eps) with the Bessel std (verl-agent `torch.std`); mean_norm: G - mean.
    A group of one step gets A_S = 0 (verl-agent: its own mean, std 1).
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    out = torch.zeros_like(returns)
    members = [(member, key) for key, steps in anchor_groups(states, group).items() for member in steps]
    if members:
        rows, steps = torch.tensor([m[0] for m, _ in members]), torch.tensor([m[1] for m, _ in members])
        out[rows, steps] = keyed_normalize(returns[rows, steps], [key for _, key in members],
                                           scale=mode == "mean_std_norm", eps=eps, singletons="zero")
    return out


def _episode_advantage(batch, mode, eps, episode_stats, n_steps, allow_singletons):
    """[B] A_E per trajectory."""
    scale = "group" if mode == "mean_std_norm" else "none"
    if episode_stats == "trajectory":
        return grpo(batch, scale=scale, eps=eps, allow_singletons=allow_singletons)
    # "steps": verl-agent's default compute_mean_std_cross_steps=True, one sample per step row
    rewards = sequence_rewards(batch)
    reps = torch.tensor(n_steps)
    _, dense = torch.unique(batch.group, return_inverse=True)
    single = check_group_sizes(torch.bincount(dense)[dense], "gigpo", allow_singletons)
    # one sample per step: normalize the repeated rewards by prompt group, then read each row's first step
    keep = allow_singletons == "keep"  # verl's rule on the step samples: a pool of one sample keeps R (/(1 + eps))
    per_step = keyed_normalize(rewards.repeat_interleave(reps), batch.group.repeat_interleave(reps).tolist(),
                               scale=mode == "mean_std_norm", eps=eps, singletons="keep" if keep else "zero")
    out = per_step[reps.cumsum(0) - reps]
    return (out if keep else out.masked_fill(single, 0.0))[:, None] * batch.mask


def episode_advantage(batch: RolloutBatch, n_steps: list[int], *, mode="mean_std_norm", eps=1e-6,
                      episode_stats="trajectory", allow_singletons=False) -> torch.Tensor:
    """[B] float64 A_E per trajectory (`_episode_advantage` as one scalar per row): the group z-score of the outcome
    R_i (`grpo`), or with episode_stats="steps" the statistics over one sample per step (n_i copies of R_i)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if episode_stats not in EPISODE_STATS:
        raise ValueError(f"episode_stats must be 'trajectory' or 'steps', got {episode_stats!r}")
    one_token = RolloutBatch.from_rewards(sequence_rewards(batch), batch.group)  # [B, 1]: the advantage itself
    return _episode_advantage(one_token, mode, eps, episode_stats, n_steps, allow_singletons)[:, 0].double()


def check_turn_ids(batch: RolloutBatch, n_steps: list[int], method: str) -> torch.Tensor:
    """[B, T] long turn ids, after checking that every policy token's step id s lies in [0, n_i)."""
    batch.require("turn")
    turn = batch.turn.long()
    bad = (batch.mask > 0) & ((turn < 0) | (turn >= torch.tensor(n_steps)[:, None]))
    if bool(bad.any()):
        rows = torch.nonzero(bad.any(-1)).flatten().tolist()[:10]
        raise ValueError(f"{method}: rows {rows} have policy tokens whose turn id is outside [0, n_steps)")
    return turn


def per_token(per_step: torch.Tensor, batch: RolloutBatch, n_steps: list[int], method: str) -> torch.Tensor:
    """[B, S] one value per step -> [B, T]: every policy token gets its step's value, 0 off the mask (on the mask's
    device: per-step statistics are computed on the CPU, the rollout's tensors may live on the accelerator)."""
    turn = check_turn_ids(batch, n_steps, method)
    per_step = per_step.to(turn.device)
    return per_step.gather(1, turn.clamp(0, per_step.shape[1] - 1)).to(batch.mask.dtype) * batch.mask


def step_rewards_of(batch: RolloutBatch, n_steps: list[int], step_rewards=None) -> torch.Tensor:
    """[B, S >= max n_i] float64 per-step rewards r_{i,s}: `step_rewards` checked (finite over each row's steps),
    or, when None, the outcome R_i on each row's last step (sparse-reward agents)."""
    B, S = len(n_steps), max(n_steps)
    if step_rewards is None:
        out = torch.zeros(B, S, dtype=torch.float64)
        out[torch.arange(B), torch.tensor(n_steps) - 1] = sequence_rewards(batch)
        return out
    step_rewards = torch.as_tensor(step_rewards, dtype=torch.float64)
    if step_rewards.dim() != 2 or step_rewards.shape[0] != B or step_rewards.shape[1] < S:
        raise ValueError(f"step_rewards must have shape [B={B}, S>={S}], got {tuple(step_rewards.shape)}")
    check_rewards(torch.cat([step_rewards[i, :n] for i, n in enumerate(n_steps)]))
    return step_rewards


@registry.advantage(
    "gigpo", title="Group-in-Group Policy Optimization for LLM Agent Training",
    summary="Episode-level group advantage plus omega x step-level advantage normalized over anchor-state "
            "groups (identical environment states across the prompt group's trajectories).",
    equation=r"A_{i,t} = \frac{R_i - \mathrm{mean}_g R}{\mathrm{std}_g R} + \omega\,"
             r"\frac{G_{i,s} - \mathrm{mean}_{\mathcal{A}(s)} G}{\mathrm{std}_{\mathcal{A}(s)} G},\ "
             r"G_{i,s} = \sum_k \gamma^k r_{i,s+k}",
    reads=("turn", "turn_info"), choices={"mode": MODES, "episode_stats": EPISODE_STATS}, check=check_discounts)
def gigpo(batch: RolloutBatch, *, states=None, step_rewards=None, omega=1.0, gamma=0.95, mode="mean_std_norm",
          eps=1e-6, episode_stats="trajectory", allow_singletons=False):
    """GiGPO advantage [B, T]. Reads `rewards` (+ summed `token_rewards`), `group`, `mask`, `turn`, and, unless
    `states` is passed, `turn_info` and `turn_rewards` (what the multi-turn rollout `turns` fills).

    Anchor states and step rewards (keyword-only; by default read from the batch):
      states: list (length B) of lists; states[i][s] is the hashable environment state (anchor) that step
              s of row i acted from. len(states[i]) = number of steps n_i of row i. Default:
              batch.turn_info[i][s]["state"].
      step_rewards: [B, S >= max n_i] per-step environment rewards r_{i,s} (entries past n_i ignored).
              Default: batch.turn_rewards when the states come from the batch; with explicit `states`, or a
              batch without turn_rewards, None puts the outcome reward R_i on each row's last step
              (sparse-reward agents), so G_{i,s} = gamma^(n_i - 1 - s) R_i.
      batch.turn: [B, T] step id s of every token; policy tokens (mask 1) must have 0 <= s < n_i.
    Defaults from verl-agent scripts: omega (`step_advantage_w`) 1.0, gamma 0.95, eps 1e-6. mode:
    "mean_std_norm" (catalog; = `grpo` episode term) or "mean_norm" (no std division, verl-agent function
    default). episode_stats: "trajectory" (one sample per trajectory, = `grpo`) or "steps" (verl-agent
    `compute_mean_std_cross_steps=True`: each trajectory weighted by its number of steps).
    allow_singletons (a prompt with one trajectory): False refuses it, True gives A_E = 0, "keep" is verl-agent's
    `episode_norm_reward`: a pool of one sample has mean 0, std 1 (A_E = R / (1 + eps), or R for mean_norm); with
    episode_stats="steps" a lone trajectory of n >= 2 steps is a pool of n equal samples, A_E = 0.
    omega = 0 gives trajectory-level `grpo`; with no repeated state all anchor groups are singletons and
    A = A_E. A batch without anchor states (no `states`, no `turn_info`) warns and returns A_E alone.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if episode_stats not in EPISODE_STATS:
        raise ValueError(f"episode_stats must be 'trajectory' or 'steps', got {episode_stats!r}")
    if states is None and batch.turn_info:
        states = [[info["state"] for info in row] for row in batch.turn_info]
        if step_rewards is None and batch.turn_rewards is not None:
            step_rewards = batch.turn_rewards
    if states is None:
        warnings.warn("gigpo called without anchor `states`: no step-level groups, returning the episode "
                      "advantage A_E only (= grpo for episode_stats='trajectory'); sample with the multi-turn "
                      "rollout (batch.turn_info) or pass states=[[state per step] per row]", stacklevel=2)
        n_steps = [1] * batch.size
        return _episode_advantage(batch, mode, eps, episode_stats, n_steps, allow_singletons)
    batch.require("turn")
    B = batch.size
    n_steps = step_counts(states, B, "states")
    step_rewards = step_rewards_of(batch, n_steps, step_rewards)
    check_turn_ids(batch, n_steps, "gigpo")
    a_episode = _episode_advantage(batch, mode, eps, episode_stats, n_steps, allow_singletons)
    if omega == 0:
        return a_episode
    a_step = step_advantages(step_returns(step_rewards, n_steps, gamma), states, batch.group, mode=mode, eps=eps)
    return a_episode + omega * per_token(a_step, batch, n_steps, "gigpo")
