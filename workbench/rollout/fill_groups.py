"""Fill a step's batch with informative groups by sampling more rounds (DAPO's dynamic sampling loop)."""
from __future__ import annotations

from dataclasses import replace

import torch

from workbench.advantages.base import check_rewards
from workbench.advantages.baselines import degenerate_groups
from workbench.advantages.group import group_index
from workbench.batch import RolloutBatch, concat


def keep_informative_groups(batch: RolloutBatch) -> RolloutBatch:
    """Rows of the groups whose outcome rewards `rewards` are not all equal (verl `filter_groups`).

    Reads `rewards`, `group`. The test is on the outcome reward (verl metric `acc`/`score`), not on
    rewards with KL-in-reward added, which would make almost every group look informative. "std = 0"
    is tested exactly as max == min (singleton groups are dropped). Group ids are unchanged.
    """
    batch.require("rewards")
    check_rewards(batch.rewards)
    keep = ~degenerate_groups(batch.rewards.double(), batch.group)
    if bool(keep.all()):
        return batch
    return batch.select(torch.nonzero(keep).flatten())


def check_rounds(*, max_rounds=3, **_) -> None:
    """Sampling rounds per step (dynamic-sampling's default 3: the `check` of its registration)."""
    if max_rounds < 1:
        raise ValueError(f"max_rounds (sampling rounds per step) must be >= 1, got {max_rounds}")


def fill_groups(sample_fn, target_groups: int, max_rounds: int = 10, *, pad_id: int = 0):
    """Sample until `target_groups` informative groups are collected (DAPO dynamic sampling).

    sample_fn(round) -> RolloutBatch is called for round = 0, 1, ...; each batch is filtered with
    `keep_informative_groups`, its groups renumbered 0.. in order of collection (ids from different
    rounds never collide), and the batches concatenated (`concat`, `pad_id` for token ids). Stops once
    enough groups exist and trims to exactly `target_groups` groups (verl keeps the first
    train_batch_size groups), or after `max_rounds` calls (verl `max_num_gen_batches`; verl raises
    there, this returns what it has). Returns (batch, info) with info keys: rounds, groups,
    target_groups, shortfall (target_groups - groups, 0 when full), candidate_groups (all groups sampled),
    dropped_groups (zero-variance ones).
    """
    if target_groups < 1:
        raise ValueError(f"target_groups must be >= 1, got {target_groups}")
    check_rounds(max_rounds=max_rounds)
    kept, collected, candidates, dropped, rounds, last = [], 0, 0, 0, 0, None
    while rounds < max_rounds and collected < target_groups:
        last = sample_fn(rounds)
        rounds += 1
        informative = keep_informative_groups(last)
        n_sampled = int(torch.unique(last.group).numel())
        dense, counts = group_index(informative.group)
        candidates, dropped = candidates + n_sampled, dropped + n_sampled - counts.numel()
        if informative.size:
            kept.append(replace(informative, group=dense + collected))
            collected += counts.numel()
    if kept:
        out = concat(kept, pad_id=pad_id)
        if collected > target_groups:
            out = out.select(torch.nonzero(out.group < target_groups).flatten())
    else:
        out = last.select(torch.zeros(0, dtype=torch.long))
    groups = min(collected, target_groups)
    info = {"rounds": rounds, "groups": groups, "target_groups": target_groups,
            "shortfall": target_groups - groups, "candidate_groups": candidates, "dropped_groups": dropped}
    return out, info
