"""ExIt (exploratory iteration): start states are fresh prompts or partial histories, prioritized by learnability.

    start state s  =  a fresh pooled prompt x                        with probability 1 - b  (b = buffer_prob, 0.5)
                   =  x (+) y, a previous attempt y at x, from B     with probability b      (B non-empty)
    the policy takes one improvement step from s; its group of G answers is scored by x's own verifier
    after the step, every finished group g (start state s_g, pass rate p_g) with S(g) > 0 enters B:
        S(g)  = p_g (1 - p_g)                                 learnability: the variance of a 0/1 group return
        entry = (s_g, the group's distinct answers, S(g), depth(s_g))
    draw from B (PLR's rank prioritization, temperature beta = 0.3):
        P(entry i) = h_i^(1/beta) / sum_j h_j^(1/beta),   h_i = 1 / rank_i   (rank 1 = the highest S)
    a drawn entry gives the start state x (+) y, y one of its answers uniformly; depth(x (+) y) = depth(s_g) + 1

Self-improvement is recurrent (attempt -> revise): training on one revision step from states the policy itself
produced grows the task space a step at a time (the "task tree"), and learnability puts the steps where the group
disagrees (0 < p < 1) first.

Decisions (the card: priority transform, replay probability and history format not known; no reference code):
- The one-turn form of a partial history: the prompt with one previous attempt before it, `EXIT_TEMPLATE`
  ("Previous attempt: y\\nx"): the question stays last, so a character-level model answers where its warm start
  taught it to. Deeper histories show only their latest attempt (the tiny model's context); their depth is kept
  in the state (`depths`: the card's "task tree depth of sampled start points" per step, checkpointed). A sampler
  selects without a step context, so it logs no metrics: the buffer and the depths are read from its state.
- A derived start state is a new `Example` (prompt = the template, answer and target = x's): `task.score` reads only
  the answer, so it is scored by x's own verifier. Histories are built only from pooled prompts (the pool is drawn
  outside the held-out set), so the held-out set is never trained on.
- An entry is a finished group: its start state, its distinct answers and its S. A start state measured again
  replaces its entry (PLR: one score per level, refreshed when replayed); groups with S = 0 (all pass, all fail)
  enter nothing and remove their start state's entry. Full buffer (`capacity`): the entry of lowest S leaves first,
  ties the oldest. Rank ties go to the older entry. PLR's staleness term is not used.
- Per slot of the step a coin (probability b) says "from the buffer"; the k such slots draw k distinct entries
  without replacement (renormalized rank weights); a drawn start state already in the step goes back to the pool.
  b = 0 draws no coin: the sampler is the pool sampler draw for draw (GRPO's batches on the pool). Fresh prompts come
  first in the step, then the drawn histories.
- Groups are read from the finished batch with `observe` (the answers' texts: the sampler's `update` sees only
  rewards), every rank's rows (`ctx.gather_objects`), so every rank keeps the same buffer. The pass rate is the
  verifier's score (`scores`), not a shaped reward. Self-divergence steps ("a significantly different approach")
  are not used; the diversity bonus is `workbench.rewards.exit`.

Reference: none located (REFERENCES-AGENTS.md, section 5: only a third-party `verifiers` "self-improve"
environment); PLR's rank prioritization is Jiang et al., "Prioritized Level Replay" (temperature 0.3 as the card).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from workbench import registry
from workbench.rewards.exit import EXIT_TITLE
from workbench.samplers.pool import PoolState, PromptPool, check_pool, ensure, next_in_epoch, record, take
from workbench.tasks.base import Example
from workbench.tasks.guidance import check_template

EXIT_TEMPLATE = "Previous attempt: {hint}\n{prompt}"


@dataclass
class History:
    """A finished group from start state `key` (its prompt text): its answers, measured S and tree depth."""
    key: str              # the start state's prompt text (a pooled prompt, or one derived from it)
    base: int             # pool id of the task x it revises
    depth: int            # 0: x itself; k: x with an attempt of a depth k - 1 state
    attempts: tuple       # the group's distinct answers, in row order
    pass_rate: float
    priority: float       # S = p (1 - p)
    step: int             # the step it was measured at


@dataclass
class ExItState(PoolState):
    """The pool's state plus the buffer of partial histories (`histories`, oldest first)."""
    buffer_prob: float = 0.5
    temperature: float = 0.3
    capacity: int = 256
    template: str = EXIT_TEMPLATE
    histories: list = field(default_factory=list)   # [History]
    pending: dict = field(default_factory=dict)     # this step's derived prompt text -> (pool id, depth)
    depths: list = field(default_factory=list)      # [(step, [depth of each start state])], the newest `history`


def learnability(p: float) -> float:
    """S = p (1 - p): 1/4 at p = 1/2, 0 for a group that passes or fails throughout."""
    return p * (1.0 - p)


def rank_weights(priorities: list[float], temperature: float) -> list[float]:
    """PLR's rank prioritization: h_i = 1 / rank_i (descending S; ties to the earlier entry), P_i proportional to
    h_i^(1 / temperature), normalized."""
    order = sorted(range(len(priorities)), key=lambda i: (-priorities[i], i))
    weights = [0.0] * len(priorities)
    for rank, i in enumerate(order, start=1):
        weights[i] = (1.0 / rank) ** (1.0 / temperature)
    total = sum(weights)
    return [w / total for w in weights]


def draw_entries(histories: list[History], k: int, temperature: float, rng: random.Random) -> list[History]:
    """k distinct entries (all when fewer), one at a time by the rank weights of those not yet drawn."""
    left, out = list(histories), []
    while left and len(out) < k:
        weights = rank_weights([h.priority for h in left], temperature)
        out.append(left.pop(rng.choices(range(len(left)), weights=weights)[0]))
    return out


def start_state(base: Example, attempt: str, template: str) -> Example:
    """x (+) y: the prompt with the attempt in it; the answer and target (what the verifier reads) are x's."""
    return Example(prompt=template.format(prompt=base.prompt, hint=attempt), answer=base.answer, target=base.target)


def add_history(state: ExItState, entry: History) -> None:
    """Replace the entry of the same start state; keep it only if S > 0; evict the lowest S (ties: oldest) beyond
    capacity."""
    state.histories = [h for h in state.histories if h.key != entry.key]
    if entry.priority > 0:
        state.histories.append(entry)
    while len(state.histories) > state.capacity:
        state.histories.remove(min(state.histories, key=lambda h: h.priority))  # min keeps the first (oldest) tie


def check_exit(*, size=64, history=256, order="epoch", pool_seed=0, buffer_prob=0.5, temperature=0.3,
               capacity=256, template=EXIT_TEMPLATE, **_):
    check_pool(size=size, history=history, order=order, pool_seed=pool_seed)
    if isinstance(buffer_prob, bool) or not isinstance(buffer_prob, (int, float)) or not 0 <= buffer_prob <= 1:
        raise ValueError(f"buffer_prob must be a probability in [0, 1] (the share of start states drawn from the "
                         f"buffer of partial histories; 0 is the plain pool), got {buffer_prob!r}")
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not temperature > 0:
        raise ValueError(f"temperature must be a number > 0 (PLR's rank temperature; the card's 0.3, smaller is "
                         f"greedier), got {temperature!r}")
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
        raise ValueError(f"capacity must be an integer >= 1 (partial histories kept), got {capacity!r}; a buffer "
                         "that keeps nothing is buffer_prob=0")
    check_template(template)


def observe_histories(state: ExItState, batch, ctx, **_) -> ExItState:
    """After the step: each finished group of a start state this sampler chose (a pooled prompt or a derived one)
    enters the buffer with S = p (1 - p), p its verifier pass rate; every rank's rows, in rank order."""
    scores = (batch.scores if batch.scores is not None else batch.rewards).double().clamp(0.0, 1.0).tolist()
    groups: dict[str, list] = {}
    for prompt, answer, score in ctx.gather_objects(list(zip(map(str, batch.prompts), batch.completions, scores))):
        groups.setdefault(prompt, []).append((answer, score))
    for prompt, rows in groups.items():
        pooled = state.id_of(prompt)
        origin = (pooled, 0) if pooled is not None else state.pending.get(prompt)
        if origin is None:  # a row this sampler did not choose (e.g. a transform's resample)
            continue
        p = sum(s for _, s in rows) / len(rows)
        add_history(state, History(prompt, origin[0], origin[1], tuple(dict.fromkeys(a for a, _ in rows)), p,
                                   learnability(p), ctx.step))
    state.pending = {}
    return state


@registry.sampler(
    "exit", title=EXIT_TITLE,
    summary="A fixed pool of prompts whose start states are, with probability 0.5 each, a partial history instead: "
            "a pooled prompt with a previous attempt of it in front ('Previous attempt: ...'), scored by the "
            "prompt's own verifier. Histories are the answers of finished groups, prioritized by learnability "
            "p(1 - p) with PLR's rank sampling (temperature 0.3); all-pass and all-fail groups enter nothing.",
    equation=r"s = \begin{cases} x \sim \text{pool} & 1 - b \\ x \oplus y,\ (x, y) \sim B:\ "
             r"P_i \propto \mathrm{rank}_i^{-1/\beta},\ S = p(1-p) & b \end{cases}",
    check=check_exit, state=ExItState, observe=observe_histories)
class ExIt:
    """The pool sampler (`ensure`, `take`, `record`) with start states drawn from the history buffer."""

    @staticmethod
    def init(size=64, history=256, order="epoch", pool_seed=0, buffer_prob=0.5, temperature=0.3, capacity=256,
             template=EXIT_TEMPLATE):
        check_exit(size=size, history=history, order=order, pool_seed=pool_seed, buffer_prob=buffer_prob,
                   temperature=temperature, capacity=capacity, template=template)
        return ExItState(size=size, order=order, pool_seed=pool_seed, history=history, buffer_prob=float(buffer_prob),
                         temperature=float(temperature), capacity=capacity, template=template)

    check_run = staticmethod(PromptPool.check_run)

    @staticmethod
    def select(state: ExItState, task, n, rng):
        ensure(state, task)
        k = sum(rng.random() < state.buffer_prob for _ in range(n)) if state.buffer_prob > 0 else 0
        starts, depths = {}, []
        for entry in draw_entries(state.histories, k, state.temperature, rng):
            example = start_state(state.examples[entry.base], rng.choice(entry.attempts), state.template)
            if example.prompt not in starts:  # the same text drawn twice: that slot goes to the pool
                starts[example.prompt] = example
                state.pending[example.prompt] = (entry.base, entry.depth + 1)
                depths.append(entry.depth + 1)
        fresh = n - len(starts)
        ids = next_in_epoch(state, fresh, rng) if state.order == "epoch" else rng.sample(range(state.size), fresh)
        state.depths = (state.depths + [(state.steps, [0] * fresh + depths)])[-state.history:]
        return take(state, ids) + list(starts.values())

    @staticmethod
    def update(state, batch):
        return record(state, batch)
