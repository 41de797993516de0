"""A fixed pool of prompts that training revisits, with each prompt's pass rate over the steps.

Data-selection methods (curricula, difficulty targeting, per-prompt replay) need prompts that come back: a task's
generator rarely repeats one. The pool is `size` distinct examples drawn once from the task with `pool_seed` (the
same pool for every run seed, as a dataset is), outside the held-out set. Each step takes `n` of them: `order="epoch"`
walks the pool in a shuffled order, one epoch after another (every prompt once per epoch), `order="random"` draws n
distinct ones at random. The random streams are the step's (seed, step, round).

State (saved in every checkpoint, `workbench inspect` shows it): the pool, its cursor, each prompt's (step, pass rate)
history and the ids chosen at each step, both bounded by `history` (the newest entries stay).

    pass rate of prompt q at step t = mean over its rows of the verifier's score in [0, 1]
                                      (`advantages.group.group_pass_rates`)
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from workbench import registry
from workbench.advantages.group import group_pass_rates

@dataclass
class PoolState:
    """The pool, its settings and what the sampler knows about each of its prompts (ids are positions in
    `examples`)."""
    size: int = 64
    order: str = "epoch"                            # "epoch" (shuffled, each prompt once per epoch) or "random"
    pool_seed: int = 0
    examples: list = field(default_factory=list)
    shuffled: list = field(default_factory=list)   # the current epoch's shuffled ids (order "epoch")
    cursor: int = 0                                 # next position in `shuffled`
    epoch: int = 0
    steps: int = 0                                  # steps whose batch this state has seen (update calls)
    history: int = 256                              # entries kept per prompt and chosen-steps kept
    pass_rates: dict = field(default_factory=dict)  # id -> [(step, pass rate)], the newest `history`
    chosen: list = field(default_factory=list)      # [(step, [ids])], the newest `history` steps
    index: dict = field(default_factory=dict)       # prompt text -> id

    def last_pass_rate(self, i: int) -> float | None:
        rates = self.pass_rates.get(i)
        return rates[-1][1] if rates else None

    def id_of(self, prompt) -> int | None:
        return self.index.get(str(prompt))


def build_pool(task, size: int, pool_seed: int) -> list:
    """`size` distinct training examples of `task` (by prompt), drawn with `pool_seed`; a task that cannot give that
    many is refused, naming the fix."""
    rng, seen, out = random.Random(f"pool-{pool_seed}"), set(), []
    for _ in range(50):
        for ex in task.sample(size, rng):
            if str(ex.prompt) not in seen:
                seen.add(str(ex.prompt))
                out.append(ex)
                if len(out) == size:
                    return out
    raise ValueError(f"task {task.name!r} gave only {len(out)} distinct training prompts for a pool of size={size}: "
                     f"lower the sampler's size (--set recipe_overrides.sampler.size={len(out)}) or use a "
                     "task with more prompts")


def check_pool(*, size=64, history=256, order="epoch", pool_seed=0, **_):
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"size must be an integer >= 1 (prompts in the pool), got {size!r}")
    if isinstance(history, bool) or not isinstance(history, int) or history < 1:
        raise ValueError(f"history must be an integer >= 1 (entries kept per prompt), got {history!r}")
    if order not in ("epoch", "random"):
        raise ValueError(f"order must be 'epoch' or 'random', got {order!r}")
    if isinstance(pool_seed, bool) or not isinstance(pool_seed, int):
        raise ValueError(f"pool_seed must be an integer, got {pool_seed!r}")


@registry.sampler(
    "pool", title="A fixed pool of prompts, revisited", family="canonical",
    summary="Draws `size` distinct training prompts once (pool_seed: the same pool for every run seed), then n of "
            "them per step, an epoch at a time in a shuffled order (order='epoch') or at random; keeps each "
            "prompt's pass rate over steps and the ids chosen each step (`workbench inspect`).",
    check=check_pool)
class PromptPool:
    """The pool sampler's calls; difficulty-aware samplers reuse `ensure`, `record` and `take` and replace only the
    choice."""

    @staticmethod
    def init(size=64, history=256, order="epoch", pool_seed=0):
        check_pool(size=size, history=history, order=order, pool_seed=pool_seed)
        return PoolState(size=size, order=order, pool_seed=pool_seed, history=history)

    @staticmethod
    def check_run(task, n: int, *, size=64, pool_seed=0, **_) -> None:
        """Before anything is trained: the step's n prompts fit in the pool and the task can fill it."""
        if n > size:
            raise ValueError(f"prompts_per_step={n} is more than the pool's size={size}: a step needs n distinct "
                             f"prompts; raise size (--set recipe_overrides.sampler.size={n}) or lower "
                             "prompts_per_step")
        build_pool(task, size, pool_seed)

    @staticmethod
    def select(state, task, n, rng):
        ensure(state, task)
        ids = next_in_epoch(state, n, rng) if state.order == "epoch" else rng.sample(range(state.size), n)
        return take(state, ids)

    @staticmethod
    def update(state, batch):
        return record(state, batch)


def ensure(state: PoolState, task) -> None:
    """Build the pool on first use (a resumed run has it in its state)."""
    if not state.examples:
        state.examples = build_pool(task, state.size, state.pool_seed)
        state.index = {str(e.prompt): i for i, e in enumerate(state.examples)}


def next_in_epoch(state: PoolState, n: int, rng: random.Random) -> list[int]:
    """The next n ids of the shuffled epoch order; a new shuffled epoch when the current one runs out. The ids of a
    step are distinct: a step that straddles two epochs defers a new-epoch id it already holds to later in that epoch
    (a swap), so every epoch still takes every prompt once."""
    ids = []
    while len(ids) < n:
        if state.cursor >= len(state.shuffled):
            state.shuffled = list(range(len(state.examples)))
            rng.shuffle(state.shuffled)
            state.cursor, state.epoch = 0, state.epoch + 1
        order, c = state.shuffled, state.cursor
        if order[c] in ids:  # n <= size: a later id of this epoch is not among the step's
            later = next(j for j in range(c + 1, len(order)) if order[j] not in ids)
            order[c], order[later] = order[later], order[c]
        ids.append(order[c])
        state.cursor += 1
    return ids


def take(state: PoolState, ids: list[int]) -> list:
    """Record the step's choice and return its examples."""
    state.chosen = (state.chosen + [(state.steps, list(ids))])[-state.history:]
    return [state.examples[i] for i in ids]


def record(state: PoolState, batch) -> PoolState:
    """Each pooled prompt of the finished step gets its pass rate appended (rows of prompts outside the pool, e.g. a
    transform's resampled ones, are left out); then the step counter moves."""
    rates, prompts = group_pass_rates(batch)
    for prompt, rate in zip(prompts, rates.tolist()):
        i = state.id_of(prompt)
        if i is not None:
            state.pass_rates[i] = (state.pass_rates.get(i, []) + [(state.steps, rate)])[-state.history:]
    state.steps += 1
    return state

