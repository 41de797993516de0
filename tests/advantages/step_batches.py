"""Multi-turn batches laid out as the rollout `turns` lays them out, for the step-critic tests (vl-dac, poad, hiper,
digirl, spa-rl): per row, actions of given token lengths (mask 1) separated by `obs` observation tokens (mask 0,
same turn id, none after the last action), right-padded with turn -1."""
from __future__ import annotations

import torch

from workbench.batch import RolloutBatch

D = torch.float64


def layout(actions: list[list[int]], obs: int = 2):
    """(mask [B, T], turn [B, T], first [B, S], last [B, S]) for rows of action lengths `actions[i]`."""
    rows = []
    for lengths in actions:
        mask, turn, first, last = [], [], [], []
        for s, n in enumerate(lengths):
            first.append(len(mask))
            mask += [1.0] * n
            turn += [s] * n
            last.append(len(mask) - 1)
            if s < len(lengths) - 1:
                mask += [0.0] * obs
                turn += [s] * obs
        rows.append((mask, turn, first, last))
    T = max(len(r[0]) for r in rows)
    S = max(len(lengths) for lengths in actions)
    B = len(actions)
    mask, turn = torch.zeros(B, T, dtype=D), torch.full((B, T), -1, dtype=torch.long)
    first, last = torch.zeros(B, S, dtype=torch.long), torch.zeros(B, S, dtype=torch.long)
    for i, (m, t, f, l) in enumerate(rows):
        mask[i, :len(m)], turn[i, :len(t)] = torch.tensor(m, dtype=D), torch.tensor(t)
        first[i, :len(f)], last[i, :len(l)] = torch.tensor(f), torch.tensor(l)
    return mask, turn, first, last


def episode_batch(actions, step_rewards=None, values=None, obs=2, infos=None, group=None, seed=0) -> RolloutBatch:
    """A float64 multi-turn RolloutBatch. step_rewards: per row a list of per-step rewards (turn_rewards; rewards =
    their sum), default 0 with 1.0 on the last step of even rows. values: [B, T] or None for random values on the
    policy tokens (seeded). infos: per row per step dicts (default {"state": s, "tool_error": None})."""
    mask, turn, _, _ = layout(actions, obs)
    B, T = mask.shape
    S = max(len(a) for a in actions)
    if step_rewards is None:
        step_rewards = [[0.0] * (len(a) - 1) + [float(i % 2 == 0)] for i, a in enumerate(actions)]
    turn_rewards = torch.zeros(B, S, dtype=D)
    for i, r in enumerate(step_rewards):
        turn_rewards[i, :len(r)] = torch.tensor(r, dtype=D)
    if values is None:
        values = torch.randn(B, T, generator=torch.Generator().manual_seed(seed), dtype=D) * mask
    if infos is None:
        infos = [[{"state": s, "tool_error": None} for s in range(len(a))] for a in actions]
    return RolloutBatch(response_ids=torch.zeros(B, T, dtype=torch.long), mask=mask,
                        group=torch.zeros(B, dtype=torch.long) if group is None else torch.as_tensor(group),
                        rewards=turn_rewards.sum(-1), turn=turn, turn_rewards=turn_rewards, values=values,
                        old_values=values.clone(), turn_info=infos)


def returns_to_go(step_rewards, gamma: float = 1.0) -> list[list[float]]:
    """Per row G_s = sum_k gamma^k r_{s+k} (plain Python, for hand checks)."""
    out = []
    for row in step_rewards:
        g, acc = [], 0.0
        for r in reversed(row):
            acc = r + gamma * acc
            g.append(acc)
        out.append(g[::-1])
    return out
