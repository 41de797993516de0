"""UI-S1: semi-online step returns that reset at expert mismatches, plus an episode and a step-index advantage.

    G_{i,s} = r_{i,s} + gamma G_{i,s+1}   if step s matched the expert's action
            = r_{i,s}                     if it did not (the accumulator resets: earlier steps see nothing from s on)
    A_ep(i)   = (R_i - mean_g R) / (std_g R + eps)                R_i = sum_s r_{i,s}, the episode's return
    A_st(i,s) = (G_{i,s} - mean G) / (std G + eps)  over the steps with the same (prompt, step index s);
                0 for a group of one step
    A_{i,t}   = w_ep A_ep(i) + w_st A_st(i, turn_{i,t})           on the policy tokens of step s

Rollouts follow the example's expert trajectory (`workbench.rollout.semi_online`, registered as the `ui-s1`
rollout): the policy acts at every turn and its own actions stay in the history; a mismatch is patched with the
expert's action (at most `patch_threshold` = 2 times, then the episode stops). The step reward r_{i,s} is 1 when the
policy's action matched the expert's (UI-S1's action-match score; its format and action-type parts do not apply to
these text actions) and `turn_info[i][s]["expert_match"]` records the match.

Reading (`exact`): the paper's episode advantage is over trajectories (`episode_stats="trajectory"`, = `grpo`;
"steps": one sample per step, the code's `compute_mean_std_cross_all_data=True`); std is Bessel's (`torch.std`).
Defaults from the authors' `scripts/train_example.sh`: gamma 0.5, mode "mean_std_norm" (the function's default is
"mean_norm"), w_st = `step_advantage_w` = 1.0, w_ep = `episode_advantage_w` = 1.0, eps 1e-6, G = 8, patch_threshold 2
(and DAPO dynamic sampling on `seq_future_reward`, std threshold 0.3: a group transform, not part of this advantage).

Authors' code: X-PLUG/MobileAgent @ 11cea57 `UI-S1/uis1/core_uis1.py` (`compute_step_discounted_returns`,
`compute_uis1_outcome_advantage`, `episode_norm_reward`, `step_norm_reward`), transcribed in
tests/anchors/formulas_uis1.py. One row there is one step, and its `token_level_rewards` hold that step's own
score: the "episode" term normalizes each step's score r_{i,s} over every step sample of the prompt group (no
episode return at all), with verl's singleton convention (mean 0, std 1: A = r). `reference_bug=True` reproduces
that episode term; the step term is the code's either way (its singleton: mean = own score, A = 0).
"""
from __future__ import annotations

import torch

from workbench import registry
from workbench.advantages.base import check_discounts
from workbench.advantages.gigpo import EPISODE_STATS, MODES, episode_advantage, per_token, step_counts, step_rewards_of
from workbench.advantages.group import check_group_sizes, group_index, keyed_normalize
from workbench.batch import RolloutBatch

TITLE = "UI-S1: Advancing GUI Automation via Semi-online Reinforcement Learning"


def match_reset_returns(step_rewards: torch.Tensor, matches: list[list[bool]], gamma: float) -> torch.Tensor:
    """[B, S] G_{i,s}: discounted backwards over matching steps; a mismatched step keeps its own reward only and
    cuts the sum for the steps before it. 0 beyond each row's len(matches[i]) steps."""
    B, S = step_rewards.shape
    out = torch.zeros(B, S, dtype=torch.float64)
    for i, row in enumerate(matches):
        running = 0.0
        for s in reversed(range(len(row))):
            running = float(step_rewards[i, s]) + gamma * running if row[s] else 0.0
            out[i, s] = running if row[s] else float(step_rewards[i, s])
    return out


def step_index_advantages(values: torch.Tensor, n_steps: list[int], group: torch.Tensor, *, mode="mean_std_norm",
                          eps=1e-6) -> torch.Tensor:
    """[B, S] values normalized over the steps with the same (prompt group, step index); 0 for a group of one."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    members = [(i, s) for i, n in enumerate(n_steps) for s in range(n)]
    rows, steps = torch.tensor([m[0] for m in members]), torch.tensor([m[1] for m in members])
    out = torch.zeros_like(values, dtype=torch.float64)
    out[rows, steps] = keyed_normalize(values[rows, steps].double(), [(int(group[i]), s) for i, s in members],
                                       scale=mode == "mean_std_norm", eps=eps, singletons="zero")
    return out


def step_score_advantages(step_rewards: torch.Tensor, n_steps: list[int], group: torch.Tensor, *,
                          mode="mean_std_norm", eps=1e-6) -> torch.Tensor:
    """[B, S] the authors' "episode" term: each step's own reward normalized over every step of its prompt group
    (a group of one step keeps r / (1 + eps), verl's mean 0 / std 1)."""
    members = [(i, s) for i, n in enumerate(n_steps) for s in range(n)]
    rows, steps = torch.tensor([m[0] for m in members]), torch.tensor([m[1] for m in members])
    out = torch.zeros_like(step_rewards, dtype=torch.float64)
    out[rows, steps] = keyed_normalize(step_rewards[rows, steps].double(), [int(group[i]) for i, _ in members],
                                       scale=mode == "mean_std_norm", eps=eps, singletons="keep")
    return out


def expert_matches(batch: RolloutBatch) -> list[list[bool]]:
    """turn_info[i][s]["expert_match"] of every step, as the `ui-s1` rollout records it."""
    if not batch.turn_info:
        raise ValueError("ui-s1 needs each step's expert match: sample with the ui-s1 rollout (recipe "
                         "rollout='ui-s1') or pass matches=[[bool per step] per row]")
    try:
        return [[bool(info["expert_match"]) for info in row] for row in batch.turn_info]
    except KeyError:
        raise ValueError("ui-s1: turn_info has no 'expert_match' (the plain `turns` rollout does not follow an "
                         "expert); use the ui-s1 rollout or pass matches=[[bool per step] per row]") from None


@registry.advantage(
    "ui-s1", title=TITLE,
    summary="Step returns accumulated backwards only over expert-matching steps (a mismatch resets them), "
            "normalized per (prompt, step index), plus the episode's group advantage.",
    equation=r"A_{i,s} = w_{ep}\frac{R_i - \mathrm{mean}_g R}{\mathrm{std}_g R} + w_{st}"
             r"\frac{G_{i,s} - \mathrm{mean}_{(g,s)} G}{\mathrm{std}_{(g,s)} G},\ "
             r"G_{i,s} = r_{i,s} + \gamma\,[\mathrm{match}_{i,s}]\,G_{i,s+1}",
    reads=("turn", "turn_info"), needs=("multi_turn", "expert"),
    choices={"mode": MODES, "episode_stats": EPISODE_STATS}, check=check_discounts)
def uis1(batch: RolloutBatch, *, gamma=0.5, episode_advantage_w=1.0, step_advantage_w=1.0, mode="mean_std_norm",
         eps=1e-6, episode_stats="trajectory", allow_singletons=False, reference_bug=False, matches=None,
         step_rewards=None):
    """UI-S1 advantage [B, T]. Reads `turn`, `mask`, `group`, `rewards` and, unless passed, `turn_info` (each step's
    "expert_match") and `turn_rewards` (per-step rewards r_{i,s}; None: the outcome on the last step).

    matches: per row, one bool per step (its length is the row's number of steps). mode: "mean_std_norm" or
    "mean_norm" (both terms). episode_stats: "trajectory" (one sample per episode, = `grpo`) or "steps".
    reference_bug: the authors' episode term (each step's own reward over all step samples of the prompt group).
    allow_singletons (a prompt with one trajectory): False refuses it, True gives its episode term 0, "keep" the
    code's verl rule (a pool of one sample: mean 0, std 1), see `gigpo`; the step term is the code's either way.
    step_advantage_w = 0 gives the episode advantage alone (`grpo` with the defaults).
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if matches is None:
        matches = expert_matches(batch)
        if step_rewards is None:
            step_rewards = batch.turn_rewards
    n_steps = step_counts(matches, batch.size, "matches")
    r = step_rewards_of(batch, n_steps, step_rewards)
    if reference_bug:
        dense, sizes = group_index(batch.group)
        single = check_group_sizes(sizes[dense], "ui-s1", allow_singletons)
        a_episode = step_score_advantages(r, n_steps, batch.group, mode=mode, eps=eps)  # the code's: "keep"
        a_episode = a_episode.masked_fill(single[:, None] & (allow_singletons != "keep"), 0.0)
    else:
        a_row = episode_advantage(batch, n_steps, mode=mode, eps=eps, episode_stats=episode_stats,
                                  allow_singletons=allow_singletons)
        a_episode = a_row[:, None].expand_as(r)
    a_step = step_index_advantages(match_reset_returns(r, matches, gamma), n_steps, batch.group, mode=mode, eps=eps)
    return per_token(episode_advantage_w * a_episode + step_advantage_w * a_step, batch, n_steps, "ui-s1")
