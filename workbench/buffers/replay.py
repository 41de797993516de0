"""Replay storage: finished rows kept across steps, bounded, with a stated eviction rule.

A buffer holds entries, one batch row each (its tensors on the CPU), with the source prompt (`key`), the step it was
added at and its reward. It never holds more than `capacity` entries, nor more than `per_key` of one prompt; when
an add would exceed either, the oldest entries leave first (FIFO: ARPO-GUI's per-task deque of 8 is `per_key=8`;
DOTS's "one group per question, keep the latest" is `per_key=G` with a group added whole). With `max_age`, entries
added more than `max_age` steps before the current one leave at every add (SPEAR's `trajectory_tolerate_steps`).

Rows are stored as the stage that adds them sees them, minus what a later stage derives again from the current
policy (`DERIVED`: old/reference log-probs, advantages, values, ...), so a replayed row is concatenated with a batch
at the same stage. Draws use the caller's random stream (`StepContext.rng`: seeded by seed, step, round and
component), so a run and its resumption draw the same rows.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field, fields, replace

import torch

from workbench.batch import RolloutBatch, concat

# Fields a later stage computes again for the policy that trains on the row (forward passes, shaping, advantages).
DERIVED = ("logp", "old_logp", "ref_logp", "entropy", "token_rewards", "values", "old_values", "advantages",
           "target_adv", "returns", "value_mask", "old_vocab_mean_logp", "ref_argmax", "prev_logp", "head", "logits")


@dataclass(eq=False)
class Entry:
    key: str            # the row's prompt (text): per-prompt replay and dedup read it
    step: int           # the step it was added at
    reward: float
    row: RolloutBatch   # one row

    def __eq__(self, other) -> bool:
        """The same prompt, step, reward and row (every tensor equal): what ranks compare to agree on a buffer."""
        if not isinstance(other, Entry) or (self.key, self.step, self.reward) != (other.key, other.step, other.reward):
            return False
        return all(torch.equal(a, b) if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) else a == b
                   for a, b in ((getattr(self.row, f.name), getattr(other.row, f.name)) for f in fields(self.row)))


@dataclass
class ReplayBuffer:
    capacity: int
    per_key: int | None = None
    max_age: int | None = None
    entries: list = field(default_factory=list)  # oldest first
    added: int = 0                               # rows ever added
    evicted: int = 0                             # rows that left (full, per-key bound or age)

    def add(self, entries: list[Entry], step: int) -> None:
        """Store `entries` (`entries_of`; under data parallelism every rank's, gathered in rank order, so that every
        rank keeps the same buffer), then evict by age and by the bounds."""
        self.entries += entries
        self.added += len(entries)
        self.evict(step)

    def evict(self, step: int) -> None:
        keep = [e for e in self.entries if self.max_age is None or step - e.step <= self.max_age]
        if self.per_key is not None:  # the newest per_key of each prompt
            seen: dict[str, int] = {}
            for e in reversed(keep):
                seen[e.key] = seen.get(e.key, 0) + 1
            over = {k: n - self.per_key for k, n in seen.items() if n > self.per_key}
            kept = []
            for e in keep:
                if over.get(e.key, 0) > 0:
                    over[e.key] -= 1
                else:
                    kept.append(e)
            keep = kept
        keep = keep[-self.capacity:]
        self.evicted += len(self.entries) - len(keep)
        self.entries = keep

    def of_key(self, key: str) -> list[Entry]:
        return [e for e in self.entries if e.key == key]

    def draw(self, n: int, rng: random.Random, key: str | None = None) -> list[Entry]:
        """n entries at random without replacement (all of them when fewer), of one prompt when `key` is given."""
        pool = self.entries if key is None else self.of_key(key)
        return rng.sample(pool, min(n, len(pool)))

    def __len__(self) -> int:
        return len(self.entries)

    def summary(self, step: int | None = None) -> dict:
        """What `workbench inspect` prints: size, bounds, how many came and went, and per entry its age, reward and
        prompt."""
        now = step if step is not None else max((e.step for e in self.entries), default=0)
        return {"size": len(self), "capacity": self.capacity, "per_key": self.per_key, "max_age": self.max_age,
                "added": self.added, "evicted": self.evicted, "prompts": len({e.key for e in self.entries}),
                "entries": [{"age": now - e.step, "step": e.step, "reward": e.reward, "prompt": e.key}
                            for e in self.entries]}


def entries_of(batch: RolloutBatch, rows, step: int) -> list[Entry]:
    """Rows `rows` (indices into `batch`) as entries added at `step`: prompt, reward and the stripped row."""
    return [Entry(str(batch.prompts[i]) if batch.prompts else "", step, float(batch.rewards[i]),
                  strip(batch.select(torch.tensor([i])))) for i in (int(i) for i in rows)]


def strip(row: RolloutBatch) -> RolloutBatch:
    """A row without what later stages derive again (`DERIVED`)."""
    return replace(row, **{name: None for name in DERIVED if getattr(row, name) is not None})


def rows_of(entries: list[Entry], group: int, pad_id: int) -> RolloutBatch:
    """The entries' rows as one batch, every row in group `group`."""
    batch = concat([e.row for e in entries], pad_id=pad_id)
    batch.group = torch.full((batch.size,), group, dtype=torch.long)
    return batch


def check_buffer(*, capacity, per_key=None, max_age=None) -> None:
    """A buffer's bounds: refused unless they bound it (a capacity of 0 stores nothing and is an error, not a no-op)."""
    for name, value, least in (("capacity", capacity, 1), ("per_key", per_key, 1), ("max_age", max_age, 0)):
        if value is None and name != "capacity":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{name} must be an integer >= {least}, got {value!r}"
                             + (" (a buffer that stores nothing replays nothing: drop the component instead)"
                                if name == "capacity" and value == 0 else ""))
