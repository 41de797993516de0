"""CM2's checklist rewards (paper Eq. 2-3): binary items per user turn, with weights, dependencies and strictness,
labelled by a judge after every step; an item pays once, at the step that flips it to satisfied.

    Sat_{t,c}(x_s)       the judge's label of item c of turn t in state x_s (x_0: the turn's start, unsatisfied;
                         x_{s+1}: after step s)
    eligible_{t,s,c}   = [deps of c satisfied in x_s] [Sat_{t,c}(x_s) = 0]
    r_{t,s,c}          = eligible_{t,s,c} [Sat_{t,c}(x_{s+1}) = 1], first such s only     (rewarded once)
    r~_{t,s,c}         = eligible_{t,s,c} [s <= k_{t,c}], k the step r pays at            (backfilled)
    R                  = (1 / L) sum_t sum_s sum_c w_{t,c} r_{t,s,c}  in [0, 1]            (sum_c w_{t,c} = 1)
    a strict item never satisfied in its turn ends the dialogue: later turns earn nothing.

The trajectory reward R is the `reward` (TRL's signature); the step rewards and backfilled steps are for the step
advantages of `cm2-advantage`. Toy stand-in for the paper's LLM judge: a rule-based judge of calculator states
(`rule_judge`: an intermediate result among the tool results so far; the final answer right) with injectable,
seeded label noise, behind a `judge` callable. Our environments have one user turn (L = 1); `trajectory_reward`
takes any number of turns.

Reference: namezhenzhang/CM2-RLCR-Tool-Agent (verl_v0.6.1_checklist: the judge call in
`utils/reward_score/checklist_reward.py`, the step scores in `interactions/checklist_interaction.py`, the
trajectory score in `workers/reward_manager/checklist.py`); see tests/anchors/formulas_cm2.py for where its
code and the paper's equations part ways.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable, Protocol

import torch

from workbench import registry
from workbench.rewards import base
from workbench.rewards.milestones import episode_actions, solution_steps, step_results

KEY = "cm2-checklist"


@dataclass(frozen=True)
class Item:
    """One checklist item: what it asks, its weight w (a turn's weights sum to 1), the ids of the items it
    depends on, whether it is strict (unsatisfied at the end of its turn ends the dialogue), and for the rule
    judge what satisfies it: kind "result" (a tool result equals `value`) or "answer" (the final answer is right)."""

    id: str
    weight: float
    deps: tuple[str, ...] = ()
    strict: bool = False
    kind: str = "result"
    value: int | None = None
    text: str = ""


@dataclass(frozen=True)
class State:
    """x_s of a calculator episode: the tool results so far, whether the episode has answered and whether that
    answer is right, and the transcript of the actions so far (for a model judge)."""

    results: tuple[int, ...] = ()
    answered: bool = False
    correct: bool = False
    transcript: str = ""


class Judge(Protocol):
    """Sat(x) of one item: `judge(item, state) -> bool`. A model judge (the paper's) prompts an LLM with the item
    and `state.transcript`; the toy's is `rule_judge`."""

    def __call__(self, item: Item, state: State) -> bool: ...


def rule_judge(item: Item, state: State) -> bool:
    """The toy judge: a "result" item is satisfied once a tool result equals its value (two items of equal value
    are satisfied together), an "answer" item once the episode has answered right."""
    if item.kind == "answer":
        return state.answered and state.correct
    return item.value in state.results


def with_noise(judge: Judge, noise: float, rng: random.Random) -> Judge:
    """`judge` whose every label is flipped with probability `noise` (drawn from `rng`, in call order)."""
    if not 0 <= noise <= 1:
        raise ValueError(f"{KEY}: noise (the judge's label-flip probability) must be in [0, 1], got {noise}")
    if noise == 0:
        return judge
    return lambda item, state: judge(item, state) != (rng.random() < noise)


# ----------------------------------------------------------------------------- the math (one turn)

def check_turn(sat: torch.Tensor, deps: list[tuple[int, ...]], weights: torch.Tensor | None = None) -> None:
    """sat [S, C] labels after each step; deps[c] the indices of c's dependencies; weights [C] summing to 1."""
    if sat.dim() != 2 or sat.shape[1] != len(deps):
        raise ValueError(f"{KEY}: sat must be [S steps, C items] with C = len(deps) = {len(deps)}, got "
                         f"{tuple(sat.shape)}")
    for c, ds in enumerate(deps):
        if any(not 0 <= d < len(deps) or d == c for d in ds):
            raise ValueError(f"{KEY}: item {c} depends on {ds}; dependencies are other items' indices in "
                             f"[0, {len(deps)})")
    stuck = blocked_items(deps)
    if stuck:
        raise ValueError(f"{KEY}: the dependencies {deps} form a cycle: items {stuck} wait on each other (or on a "
                         "cycle) and could never pay; a checklist's dependencies must be acyclic")
    if weights is not None:
        if weights.shape != (len(deps),) or bool((weights < 0).any()) or abs(float(weights.sum()) - 1) > 1e-6:
            raise ValueError(f"{KEY}: a turn's weights must be {len(deps)} non-negative numbers summing to 1, got "
                             f"{weights.tolist()}")


def blocked_items(deps: list[tuple[int, ...]]) -> list[int]:
    """Items no order of satisfaction can reach: on a dependency cycle or behind one ([] for an acyclic checklist).
    Kahn's algorithm: peel off the items whose dependencies are all peeled."""
    waiting = {c: set(ds) for c, ds in enumerate(deps)}
    while True:
        free = [c for c, ds in waiting.items() if not ds]
        if not free:
            return sorted(waiting)
        for c in free:
            del waiting[c]
        for ds in waiting.values():
            ds.difference_update(free)


def states_before(sat: torch.Tensor) -> torch.Tensor:
    """[S, C] Sat(x_s): the labels after step s - 1, all False at the turn's start x_0."""
    return torch.cat([torch.zeros_like(sat[:1]), sat[:-1]]) if sat.shape[0] else sat


def eligible(sat: torch.Tensor, deps: list[tuple[int, ...]]) -> torch.Tensor:
    """[S, C] bool: item c can still pay at step s (its dependencies satisfied in x_s, itself not yet)."""
    check_turn(sat, deps)
    before = states_before(sat.bool())
    deps_ok = torch.stack([before[:, list(ds)].all(-1) if ds else torch.ones(sat.shape[0], dtype=torch.bool)
                           for ds in deps], dim=-1) if deps else before
    return deps_ok & ~before


def step_rewards(sat: torch.Tensor, deps: list[tuple[int, ...]]) -> torch.Tensor:
    """[S, C] bool r_{s,c}: the first eligible flip of each item (later flips, e.g. after a noisy judge took the
    label back, pay nothing: each item contributes at most once per rollout)."""
    flips = eligible(sat, deps) & sat.bool()
    return flips & (flips.long().cumsum(0) == 1)


def backfilled(sat: torch.Tensor, deps: list[tuple[int, ...]]) -> torch.Tensor:
    """[S, C] bool r~_{s,c}: the eligible steps up to and including the step the item pays at (none for an item
    that never pays). With a judge whose labels never flip back this is the paper's
    [eligible] [exists u >= s: Sat(x_{u+1}) = 1] exactly; under noise we keep the once-per-item rule."""
    paid = step_rewards(sat, deps)
    if sat.shape[0] == 0:
        return paid
    s = torch.arange(sat.shape[0])[:, None]
    k = torch.where(paid.any(0), paid.long().argmax(0), torch.full((sat.shape[1],), -1))  # [C] paying step
    return eligible(sat, deps) & (s <= k[None, :])


def turn_reward(sat: torch.Tensor, deps: list[tuple[int, ...]], weights: torch.Tensor) -> torch.Tensor:
    """sum_s sum_c w_c r_{s,c} (float64 scalar) in [0, 1]."""
    weights = torch.as_tensor(weights, dtype=torch.float64)
    check_turn(sat, deps, weights)
    return (step_rewards(sat, deps).double() * weights).sum()


def trajectory_reward(turns: list[tuple], *, strict: list | None = None) -> torch.Tensor:
    """R = (1/L) sum_t turn_reward over the L turns of the checklist, each (sat [S_t, C_t], deps, weights); a
    strict item (strict[t][c]) the judge never marked satisfied in its turn ends the dialogue there, so the
    turns after it earn nothing (the reference's `required_for_next_turn`). A turn never reached has S_t = 0."""
    if not turns:
        raise ValueError(f"{KEY}: a checklist needs at least one turn")
    total = torch.zeros((), dtype=torch.float64)
    for t, (sat, deps, weights) in enumerate(turns):
        total = total + turn_reward(sat, deps, weights)
        flags = torch.as_tensor(strict[t], dtype=torch.bool) if strict is not None else None
        if flags is not None and bool((flags & ~sat.bool().any(0)).any()):
            break
    return total / len(turns)


# ----------------------------------------------------------------------------- the toy: calculator checklists

def calculator_checklist(prompt) -> list[Item]:
    """Items of one calculator example: "computed intermediate result k" for each expert call (depending on the
    items whose results it takes as operands), then "final answer right" (strict, no dependency: the right answer
    reached another way still counts); equal weights. Any other prompt: the answer item alone (weight 1)."""
    steps = solution_steps(prompt)
    n = len(steps) + 1
    items = [Item(id=f"r{k}", weight=1 / n, deps=tuple(f"r{d}" for d in deps), value=value,
                  text=f"computed intermediate result {k + 1} ({value})") for k, (value, deps) in enumerate(steps)]
    return items + [Item(id="answer", weight=1 / n, strict=True, kind="answer", text="final answer right")]


def calculator_states(actions: list[str], correct: bool, *, inline: bool) -> list[State]:
    """x_1..x_S of an episode: the tool results after each step; the last step, unless it is a tool call, is the
    answer (right iff `correct`, the environment's verdict)."""
    states, results, transcript = [], (), ""
    produced = step_results(actions, inline=inline)
    for s, (action, result) in enumerate(zip(actions, produced)):
        results, transcript = results + ((result,) if result is not None else ()), transcript + action
        answered = s == len(actions) - 1 and result is None
        states.append(State(results, answered, answered and correct, transcript))
    return states


def labels(items: list[Item], states: list[State], judge: Judge) -> tuple[torch.Tensor, list[tuple[int, ...]]]:
    """(sat [S, C] the judge's labels after each step, deps as item indices)."""
    index = {item.id: c for c, item in enumerate(items)}
    unknown = sorted({d for item in items for d in item.deps} - set(index))
    if unknown:
        raise ValueError(f"{KEY}: items depend on unknown ids {unknown}")
    sat = torch.tensor([[bool(judge(item, state)) for item in items] for state in states],
                       dtype=torch.bool).reshape(len(states), len(items))
    return sat, [tuple(index[d] for d in item.deps) for item in items]


@dataclass
class Row:
    """One rollout's checklist (one user turn): items, the judge's labels, dependencies, weights."""

    items: list[Item]
    sat: torch.Tensor                  # [S, C]
    deps: list[tuple[int, ...]]
    weights: torch.Tensor              # [C]

    @property
    def reward(self) -> float:
        strict = [[item.strict for item in self.items]]
        return float(trajectory_reward([(self.sat, self.deps, self.weights)], strict=strict))


def checklist_rows(completions, *, judge: Judge | None = None, noise=0.0, seed=0,
                   checklist: Callable | None = None, verifier="auto", **columns) -> list[Row | None]:
    """Per row its `Row` (None when correctness is unknown), the labels from `judge` (default `rule_judge`) with
    each label flipped with probability `noise`, drawn from random.Random(f"{seed}-{step}-{row}") so a resumed run
    draws the same flips."""
    with_noise(rule_judge, noise, random.Random(0))  # checks noise before anything is computed
    prompts = base.column(columns, "prompts", required=KEY)
    correct = base.correctness(completions, reward=KEY, verifier=verifier, **columns)
    actions, inline = episode_actions(completions, columns, reward=KEY)
    step, _ = base.training_step(columns)  # ours, or TRL's trainer_state.global_step; 0 when neither is given
    make = checklist or calculator_checklist
    rows = []
    for i, (prompt, ok) in enumerate(zip(prompts, correct, strict=True)):
        if ok is None:
            rows.append(None)
            continue
        items = make(prompt)
        noisy = with_noise(judge or rule_judge, noise, random.Random(f"{seed}-{step}-{i}"))
        sat, deps = labels(items, calculator_states(actions[i], ok, inline=inline), noisy)
        rows.append(Row(items, sat, deps, torch.tensor([item.weight for item in items], dtype=torch.float64)))
    return rows


@registry.reward(
    KEY, title="CM2: Reinforcement Learning with Checklist Rewards for Multi-Turn and Multi-Step Agentic Tool Use",
    summary="Checklist reward in [0, 1]: weighted binary items with dependencies, each paid once at the step a "
            "judge first flips it to satisfied, averaged over turns; a failed strict item ends the dialogue. "
            "Toy stand-in: a rule-based judge of calculator states with seeded label noise.",
    equation=r"R = \frac{1}{L}\sum_t\sum_s\sum_c w_{t,c}\,[\mathrm{Dep}_{t,c}(x_s)]\,[\mathrm{Sat}_{t,c}(x_s)=0]\,"
             r"[\mathrm{Sat}_{t,c}(x_{s+1})=1]", choices={"verifier": base.CORRECTNESS_VERIFIERS})
def checklist_reward(completions, *, judge=None, noise=0.0, seed=0, checklist=None, verifier="auto",
                     **columns) -> list[float | None]:
    """R per row (see the module docstring), None when correctness is unknown.

    Reads `prompts` (the checklist: `calculator_checklist`, or `checklist(prompt) -> list[Item]`; plain or
    conversational), `scores` or `answer` (the answer item) and `turn_info` (each step's action; without it the
    completion is cut into steps at each "]", the calculator's stop string). judge: `Judge` callable, default
    `rule_judge` (toy stand-in for the paper's LLM judge); noise: its label-flip probability (0: exact), seeded by
    `seed`, the step and the row. verifier: how the answer item is judged without `scores` (TRL): "auto" the
    dependency-free exact verifier (reads the toy's "A:26"), "math" math-verify (`base.correctness`). A one-turn
    episode is one step: R = w_answer [right] (= correctness for a prompt without intermediate items).
    """
    return [None if row is None else row.reward
            for row in checklist_rows(completions, judge=judge, noise=noise, seed=seed, checklist=checklist,
                                      verifier=verifier, **columns)]
