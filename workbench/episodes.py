"""Episodes replayed exactly: the seed a row's episode ran with, and the environment rebuilt from its actions.

    seed = episode_seed(example, row % group_size)       fixed by the example and the row's index in its group
    env  = replay(task, example, seed, actions)          the state a recorded episode was in after `actions`

The rollout seeds every episode with `episode_seed`, so a component holding the batch and the run's task
(`StepContext.task`) rebuilds any row's environment mid-episode with `replay` (Monte Carlo continuations from a
saved state). Both are pure: they use only `task.make_env()` and the environment protocol (`workbench.envs.base`).
"""
from __future__ import annotations

import hashlib
from dataclasses import asdict, is_dataclass


def episode_seed(example, index: int) -> int:
    """A seed fixed by the example and the row's sample index in its group (the same in every process, unlike
    `hash`): an environment with random dynamics replays identically, and a group's rows differ."""
    return seed_of(example_key(example), index)


def group_seeds(examples, group_size: int) -> list[int]:
    """`episode_seed` of every row of a grouped batch (row i answers examples[i // group_size]), each example's
    key built once (a dataclass's `asdict` costs more than the hash)."""
    return [seed_of(key, j) for key in map(example_key, examples) for j in range(group_size)]


def example_key(example) -> str:
    return repr(sorted(asdict(example).items())) if is_dataclass(example) else repr(example)


def seed_of(key: str, index: int) -> int:
    return int.from_bytes(hashlib.sha256(f"{key}\0{index}".encode()).digest()[:4], "little")


def replay(task, example, seed: int, actions: list[str]):
    """A fresh environment of `task` reset on (example, seed) and stepped through `actions`: the state a recorded
    episode was in after them (a row's seed is `episode_seed(example, row % group_size)`, its actions
    `turn_info[row][s]["action"]`). Environments are deterministic given the seed, so this is exact."""
    env = task.make_env()
    env.reset(example, seed)
    for s, action in enumerate(actions):
        _, _, done, _ = env.step(action)
        if done and s < len(actions) - 1:
            raise ValueError(f"replay: action {s} ({action!r}) ends the episode but {len(actions) - 1 - s} follow")
    return env
