"""RAPO's curriculum pruning (Fathom-DeepResearch): a prompt the whole group solved is never sampled again.

    p_q(t)  = mean over the group of prompt q at step t of the verifier's score  (`group.group_pass_rates`)
    p_q(t) = 1  ->  q joins the pruned set P;  the step's n prompts come from the pool minus P, an epoch at a time

The pool, its (step, pass rate) history and the epoch walk are `samplers.pool`'s (`ensure`, `record`, `take`); this
sampler only replaces the choice: each epoch walks the unpruned prompts in a shuffled order (a prompt pruned in the
middle of an epoch is skipped when its turn comes), a step's n prompts are distinct.

Decisions (the paper gives the idea only; Fathom-DeepResearch's released code is inference-only):
  - "solved by the whole group" is a pass rate of 1: mean score 1 (>= `solved`, default 1.0) over the group's rows
    as the update sees them. On a 0/1 verifier this is "every sample correct". A group that `transform:rapo` gave a
    replayed success was an all-fail group (pass rate 1/G afterwards), so replay never prunes a prompt.
  - The pool never runs dry: pruning stops when it would leave fewer than n unpruned prompts (n = prompts_per_step,
    remembered from `select`). A solved prompt that is not pruned for that reason is counted in the state's `deferred`
    (`workbench inspect` shows it; a sampler logs no metrics) and stays sampleable; it is
    pruned on a later step if it is solved again once the cap allows. Prompts are pruned in ascending id order, so
    which of several solved prompts is kept is deterministic (the same on a resumed run).
  - Pruning is permanent: there is no un-pruning when the policy later forgets a prompt (the card's reading).

State: the pool's (`PoolState`) plus the pruned ids, in the order they were pruned (picklable, checkpointed).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from workbench import registry
from workbench.advantages.rapo import RAPO_TITLE
from workbench.samplers.pool import PoolState, PromptPool, check_pool, ensure, record, take



@dataclass
class PrunedPoolState(PoolState):
    solved: float = 1.0                           # pass rate at which a prompt is pruned
    pruned: list = field(default_factory=list)    # ids, in the order they were pruned
    deferred: int = 0                             # solved prompts kept because fewer than n would remain
    n: int = 0                                    # prompts per step (the last `select`'s n)

    def active(self) -> list[int]:
        gone = set(self.pruned)
        return [i for i in range(len(self.examples)) if i not in gone]


def check_rapo_sampler(*, solved=1.0, order="epoch", **kw) -> None:
    check_pool(order=order, **kw)
    if order != "epoch":
        raise ValueError(f"order={order!r}: rapo walks the unpruned prompts an epoch at a time; use order='epoch'")
    if isinstance(solved, bool) or not isinstance(solved, (int, float)) or not 0 < solved <= 1:
        raise ValueError(f"solved={solved!r} is the group pass rate at which a prompt is pruned: give a number in "
                         "(0, 1] (the card's 1: every sample of the group correct)")


def next_unpruned(state: PrunedPoolState, n: int, rng: random.Random) -> list[int]:
    """The next n distinct unpruned ids of the shuffled epoch order; a new epoch (a shuffle of the unpruned ids) when
    the current one runs out. As `pool.next_in_epoch`, an id the step already holds is swapped with a later one of the
    epoch (one exists: at least n ids are unpruned, `prune` keeps it so)."""
    gone, ids = set(state.pruned), []
    while len(ids) < n:
        if state.cursor >= len(state.shuffled):
            state.shuffled = state.active()
            rng.shuffle(state.shuffled)
            state.cursor, state.epoch = 0, state.epoch + 1
        order, c = state.shuffled, state.cursor
        if order[c] in gone:  # pruned since this epoch was shuffled
            state.cursor += 1
            continue
        if order[c] in ids:
            later = next(j for j in range(c + 1, len(order)) if order[j] not in ids and order[j] not in gone)
            order[c], order[later] = order[later], order[c]
        ids.append(order[c])
        state.cursor += 1
    return ids


def prune(state: PrunedPoolState, step: int) -> list[int]:
    """Prune the prompts whose pass rate recorded at `step` reached `solved`, in ascending id order, while more
    than n stay unpruned; the rest are `deferred`. Returns the ids pruned."""
    solved = sorted(i for i, rates in state.pass_rates.items() if rates[-1][0] == step and rates[-1][1] >= state.solved
                    and i not in set(state.pruned))
    room = len(state.active()) - max(state.n, 1)
    state.pruned += solved[:max(room, 0)]
    state.deferred += len(solved) - min(len(solved), max(room, 0))
    return solved[:max(room, 0)]


@registry.sampler(
    "rapo", title=RAPO_TITLE,
    summary="RAPO's curriculum pruning on a fixed pool of prompts: a prompt whose whole group was correct (pass rate "
            "1) is never sampled again; the step's prompts are drawn an epoch at a time from the unpruned ones, and "
            "pruning stops while it would leave fewer than a step's n prompts.",
    equation=r"\bar r_q(t) = 1 \;\Rightarrow\; P \leftarrow P \cup \{q\},\quad x_t \sim \mathcal{D} \setminus P",
    check=check_rapo_sampler)
class RapoPool:
    """The pool's calls with pruning; `check_run` is the pool's (a step's n prompts fit in it, the task fills it)."""

    @staticmethod
    def init(size=64, history=256, order="epoch", pool_seed=0, solved=1.0):
        check_rapo_sampler(size=size, history=history, order=order, pool_seed=pool_seed, solved=solved)
        return PrunedPoolState(size=size, order=order, pool_seed=pool_seed, history=history, solved=solved)

    check_run = staticmethod(PromptPool.check_run)

    @staticmethod
    def select(state, task, n, rng):
        ensure(state, task)
        state.n = n
        return take(state, next_unpruned(state, n, rng))

    @staticmethod
    def update(state, batch):
        step = state.steps
        record(state, batch)  # every rank's rows (the pipeline gathers them): the pruned set is the same on all
        prune(state, step)
        return state
