"""SPIRAL's role-conditioned baseline: one exponential moving average of the return per role, kept across steps.

For each row i in turn (row order; role k = agent(i), return R_i):

    b_i   = m_k                                  the role's average before this row (SPIRAL: "before updating, to be
                                                 unbiased")
    m_k  <- d m_k + (1 - d) R_i                  d = 0.95

`batch.baseline_rewards` = b, so the ReMax-style advantage that reads it (`advantage:remax`) gives A = R - b_role:
a zero-sum game's roles get their own baselines (the first mover's edge is not credited to its moves).

Reference: spiral-rl/spiral @ a02d0ed8d11c57e0ee4a4096e9881866d69a052b, `train_spiral.py` (L158-163: one `EMA` per
player id 0 / 1, `role_baseline_ema_gamma` 0.95; L485-495 in `prepare_trajectories`: per game, per trained player,
baseline = ema.get(), then ema.update(reward), reward -= baseline), `spiral/utils.py::EMA` (value starts at 0.0).

Decisions:
  - Shape: a stateful group transform (the state {role: m_k} lives in the pipeline's state, saved in every checkpoint
    and restored exactly), followed by `remax`, which already turns `baseline_rewards` into R - b. Not registered
    as an advantage: an advantage keeps no state across steps.
  - Order: the authors update after every game, in the order games finish; here row by row in batch order (episode,
    then agent: the rollout `agents`' order), so a row's baseline has seen the earlier rows of the same step.
  - Start: m_k = 0.0, as the authors' EMA (its `value is None` first-value branch never fires, so early baselines are
    pulled toward 0). `first_value=True` takes that branch instead: a role's first return seeds its average (its
    first row still gets b = 0: nothing was seen before it).
  - Roles are `batch.agent` (the agent index of the game), shared across the examples of a task, as the authors' key
    is the player id across games. A batch without `agent` is refused.
  - Data parallelism: a rank's rows are baselined from the step's starting averages in its own order; the averages
    are then updated with every rank's rows (`gather_objects`, rank order), so all ranks keep the same state (single
    process: exactly the authors' sequence).
"""
from __future__ import annotations

import math
from dataclasses import replace

import torch

from workbench import registry

SPIRAL_TITLE = ("SPIRAL: Self-Play on Zero-Sum Games Incentivizes Reasoning via Multi-Agent Multi-Turn Reinforcement "
                "Learning")

ROLE_BASELINE_LOGS = {
    "role_baseline/<role>": ("Role-baseline: the moving average of role <role>'s return after the step (the baseline "
                             "its next rows get).",
                             "Tracks the role's mean return; in a zero-sum game the roles' averages mirror each "
                             "other; a role stuck far from its recent returns: decay too close to 1."),
}


def check_role_baseline(*, decay=0.95, first_value=False, **_) -> None:
    if isinstance(decay, bool) or not isinstance(decay, (int, float)) or not 0 < decay < 1:
        raise ValueError(f"decay must be a number in (0, 1) (the EMA's weight on the old average; SPIRAL's 0.95), got "
                         f"{decay!r}")
    if not isinstance(first_value, bool):
        raise ValueError(f"first_value must be True or False, got {first_value!r}")


def ema_step(averages: dict, role: int, x: float, decay: float, first_value: bool) -> float:
    """The role's average before `x` (0.0 when unseen), and `averages` updated in place: m <- d m + (1 - d) x, or
    m <- x for a role's first value when `first_value`."""
    before = averages.get(role)
    averages[role] = x if before is None and first_value else decay * (before or 0.0) + (1 - decay) * x
    return 0.0 if before is None else before


def baselines(averages: dict, roles: list[int], returns: list[float], decay: float, first_value: bool) -> list[float]:
    """b_i for rows (roles, returns) in order, updating `averages` in place."""
    return [ema_step(averages, k, x, decay, first_value) for k, x in zip(roles, returns)]


@registry.group_transform(
    "role-baseline", title=SPIRAL_TITLE, family="multiagent",
    summary="SPIRAL's role-conditioned baseline: an exponential moving average (decay 0.95) of each role's return, "
            "kept across steps; each row's baseline_rewards is its role's average before the row, for remax's "
            "A = R - b_role.",
    equation=r"b_i = m_{k(i)},\quad m_k \leftarrow d\,m_k + (1 - d)\,R_i",
    reads=("rewards", "agent"), provides=("baseline_rewards",), needs=("agents",), logs=ROLE_BASELINE_LOGS,
    check=check_role_baseline, state=dict)
def role_baseline(batch, ctx, *, decay=0.95, first_value=False):
    """Fill `baseline_rewards` [B] with each row's role average before it, and update the averages (module docstring).
    Reads `rewards`, `agent`; keeps {role: average} in `ctx.state`; logs role_baseline/<role>."""
    check_role_baseline(decay=decay, first_value=first_value)
    if batch.agent is None:
        raise ValueError("role-baseline keeps one baseline per role: the batch has no agent ids; use the multi-agent "
                         "rollout `agents`")
    batch.require("rewards")
    rewards = batch.rewards.double()
    if not bool(torch.isfinite(rewards).all()):
        raise ValueError("role-baseline: rewards must be finite (fix the reward function)")
    averages: dict = ctx.state.setdefault("averages", {})
    mine = baselines(dict(averages), batch.agent.tolist(), rewards.tolist(), decay, first_value)
    everyone = ctx.gather_objects(list(zip(batch.agent.tolist(), rewards.tolist())))  # ranks may hold unequal rows
    for k, x in everyone:  # every rank's rows, so the state stays the same on all of them
        ema_step(averages, int(k), float(x), decay, first_value)
    ctx.metrics.update({f"role_baseline/{k}": float(m) for k, m in averages.items() if math.isfinite(m)})
    return replace(batch, baseline_rewards=torch.tensor(mine, dtype=batch.rewards.dtype))
