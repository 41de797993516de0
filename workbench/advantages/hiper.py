"""HiPER: hierarchical advantage estimation (HAE) for a planner that sets subgoals and an executor that acts.

An episode is cut into subgoal windows j = [t_j, t_{j+1}) (the steps spent on one subgoal). With V(s_t) the step
value (the head at the first policy token of turn t) and r_t the step rewards:

    planner   A^hi_j = sum_{t in j} gamma^(t - t_j) r_t + gamma^|j| V(s_{t_{j+1}}) - V(s_{t_j})
    executor  delta_t = r_t + gamma V(s_{t+1}) - V(s_t),   A^lo_t = delta_t + gamma lam A^lo_{t+1} inside the window,
              A^lo_e = delta_e at the window's last step e: bootstrapped with V^hi(s_{t_{j+1}}), no trace across
    step t_j (the step that acts under a new subgoal: the planner's decision) gets A^hi_j, the others A^lo_t;
    R_t = A_t + V(s_t) (the critic's targets), A z-scored over the batch's steps, broadcast to the action's tokens.

Both are `gae_and_returns` over steps with a per-step trace: lam_t = 0 at a window's last step (the boundary),
lam inside (executor) or 1 inside (planner: the window's discounted return minus its baseline).
Properties: one window per episode = flat step GAE on every step but the first, whose planner advantage is the
Monte Carlo advantage (lam = 1: everything is flat GAE); nothing after a window reaches its advantages except
through the bootstrap V(s_{t_{j+1}}).

Reading (`abstract-only`; HiPER's code, said to build on langfengQ/verl-agent, was not located):
  - Windows come from the environment: `turn_info[i][s]["subgoal"]`, as the multi-turn rollout records it, is the
    subgoal the environment reports after step s (`rollout.turns.Episode.record` lets a step's info override the
    state's, except "state"). A window ends at the step that changes it; the subgoal before step 0 is
    `initial_subgoal` (0 for `keydoor`: no key yet; `screen`: no field filled). Tasks that report subgoals:
    keydoor, screen. A batch without them is refused. `window_segments` turns the windows into `segment` ids
    [B, T] (the window of each policy token's step, -1 elsewhere), e.g. for plots.
  - One value head for both levels, told apart by position: V^hi(s_{t_j}) is the head's value at a window's first
    step, V^lo at the others; both predict the same discounted return-to-go (the executor bootstraps with V^hi at
    the window's end), so one head with one target per step serves both (no level flag).
  - gamma 0.95 (verl-agent's GiGPO default), lam 0.95: our choice, the paper's values were not located.
"""
from __future__ import annotations

import torch

from workbench import registry
from workbench.advantages.base import check_discounts
from workbench.advantages.step_critic import broadcast_steps, step_gae, step_rewards, step_targets, step_values, zscore
from workbench.batch import RolloutBatch

SUBGOAL_TASKS = "keydoor, screen"


def subgoal_windows(batch: RolloutBatch, S: int, initial_subgoal=0) -> torch.Tensor:
    """[B, S] long window index of each step (0, 1, ...; -1 past a row's steps): a window ends at the step after
    which the reported subgoal differs from the one it acted under."""
    if not batch.turn_info:
        raise ValueError("hiper needs per-step subgoals (turn_info[i][s]['subgoal']) and this batch has no turn_info; "
                         f"sample with the multi-turn rollout on a task that reports them: {SUBGOAL_TASKS}")
    out = torch.full((batch.size, S), -1, dtype=torch.long)
    for i, row in enumerate(batch.turn_info):
        missing = [s for s, info in enumerate(row) if "subgoal" not in info]
        if missing:
            raise ValueError(f"hiper: row {i} steps {missing[:5]} report no 'subgoal' in turn_info; hiper's windows "
                             f"come from the environment: train on a task that reports them ({SUBGOAL_TASKS})")
        window, before = 0, initial_subgoal
        for s, info in enumerate(row[:S]):
            out[i, s] = window
            window += info["subgoal"] != before  # this step changed the subgoal: its window ends here
            before = info["subgoal"]
    return out.to(batch.mask.device)


def window_segments(windows: torch.Tensor, batch: RolloutBatch) -> torch.Tensor:
    """[B, T] long `segment` ids: the window of each policy token's step, -1 off the policy tokens."""
    seg = windows.gather(1, batch.turn.long().clamp(0, windows.shape[1] - 1))
    return torch.where(batch.mask > 0, seg, torch.full_like(seg, -1))


def window_edges(windows: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(starts [B, S], ends [B, S]) bool: a window's first step, a window's last step (the episode's last too)."""
    prev = torch.cat([torch.full_like(windows[:, :1], -2), windows[:, :-1]], 1)
    nxt = torch.cat([windows[:, 1:], torch.full_like(windows[:, :1], -2)], 1)
    return valid & (windows != prev), valid & (windows != nxt)


def hierarchical_advantages(rewards, values, windows, valid, gamma: float, lam: float):
    """(A [B, S], R [B, S]): A^hi at each window's first step, A^lo elsewhere (module docstring), R = A + V."""
    starts, ends = window_edges(windows, valid)
    boundary = ends.to(rewards.dtype)
    executor, _ = step_gae(rewards, values, valid, gamma, lam * (1 - boundary))
    planner, _ = step_gae(rewards, values, valid, gamma, 1 - boundary)
    adv = torch.where(starts, planner, executor) * valid
    return adv, (adv + values) * valid


def hiper_steps(batch: RolloutBatch, gamma, lam, initial_subgoal):
    V, first, _, valid = step_values(batch)
    windows = subgoal_windows(batch, V.shape[1], initial_subgoal)
    adv, returns = hierarchical_advantages(step_rewards(batch, V.shape[1]), V, windows, valid, gamma, lam)
    return adv, returns, first, valid


def hiper_targets(batch: RolloutBatch, *, gamma=0.95, lam=0.95, whiten=True, eps=1e-8, initial_subgoal=0):
    """(returns [B, T], value_mask [B, T]): R_t at the first policy token of every step."""
    _, returns, first, valid = hiper_steps(batch, gamma, lam, initial_subgoal)
    return step_targets(returns, first, valid, batch)


@registry.advantage(
    "hiper",
    title="HiPER: Hierarchical Reinforcement Learning with Explicit Credit Assignment for Large Language Model "
          "Agents",
    summary="Subgoal windows from the environment: the planner's step gets the window's discounted return plus "
            "the bootstrapped next-window value minus its baseline; executor steps get GAE cut at the window's end.",
    equation=r"A^{hi}_j = \sum_{t\in j}\gamma^{t-t_j} r_t + \gamma^{|j|}V(s_{t_{j+1}}) - V(s_{t_j}),\ "
             r"A^{lo}_t = \sum_{k < t_{j+1} - t}(\gamma\lambda)^k\delta_{t+k}",
    reads=("values", "turn", "turn_info"), needs=("multi_turn", "subgoals"), targets=hiper_targets,
    check=check_discounts)
def hiper(batch: RolloutBatch, *, gamma=0.95, lam=0.95, whiten=True, eps=1e-8, initial_subgoal=0):
    """HiPER advantage [B, T]. Reads `values`, `turn`, `turn_info` (per-step "subgoal"), `mask`, `rewards`,
    `turn_rewards`, `token_rewards`. whiten: z-score over the batch's steps (`step_critic.zscore`)."""
    adv, _, _, valid = hiper_steps(batch, gamma, lam, initial_subgoal)
    adv = zscore(adv, valid, eps) if whiten else adv
    return broadcast_steps(adv, batch).to(batch.mask.dtype)
