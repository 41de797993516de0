"""Step-level data from Monte Carlo rollouts, for the step-level preference methods (MCTS-DPO, Direct-Advantage-PO).

A response is cut into steps of `step_chars` characters (the tiny tasks have no natural reasoning steps). A
state s is the prompt followed by the steps so far; its value is estimated by sampling k continuations from s
and scoring the completed responses with the task's verifier:

    V̂(s) = (1/k) Σ_j score(s ⊕ continuation_j),      V(complete response) = score(response) exactly.

This Monte Carlo value stands in for MCTS-DPO's tree-search Q values and Direct-Advantage-PO's pre-trained
critic (reading: both papers estimate the same quantity, the expected final reward from s; we use the
unbiased rollout estimate rather than a search tree or a separate value network).
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import NamedTuple

from workbench.tasks.base import Example, Task


@dataclass(frozen=True)
class StepItem:
    """One step a taken in state s: the trainer scores log π(a | prompt ⊕ prefix)."""

    prompt: str       # the task prompt followed by the steps before this one
    step: str         # the step's text
    final: bool       # the step ends the response (EOS is part of it)
    advantage: float  # V̂(s ⊕ a) − V̂(s)


class SiblingPair(NamedTuple):
    """Two next steps from one state, the higher-valued first (MCTS-DPO's step-level pair)."""

    prompt: str           # the task prompt followed by the shared prefix s
    chosen: str
    rejected: str
    chosen_final: bool    # the step ends the response (scored with EOS)
    rejected_final: bool
    chosen_q: float       # V̂(s ⊕ step)
    rejected_q: float


def split_steps(response: str, step_chars: int) -> list[str]:
    """The response in consecutive pieces of `step_chars` characters (an empty response is one empty step)."""
    if step_chars < 1:
        raise ValueError(f"step_chars must be >= 1, got {step_chars}")
    return [response[i:i + step_chars] for i in range(0, len(response), step_chars)] or [""]


def prefix_values(engine, task: Task, states: list[tuple[Example, str]], *, k: int, max_new_tokens: int,
                  temperature: float = 1.0) -> list[float]:
    """V̂(prompt ⊕ prefix) for each (example, prefix): the mean verifier score of k sampled continuations."""
    if k < 1:
        raise ValueError(f"k (continuations per state) must be >= 1, got {k}")
    if not states:
        return []
    gen = engine.generate([e.prompt + prefix for e, prefix in states], n=k, max_new_tokens=max_new_tokens,
                          temperature=temperature)
    return [sum(task.score(prefix + gen.texts[i * k + j], e) for j in range(k)) / k
            for i, (e, prefix) in enumerate(states)]


def advantage_steps(engine, task: Task, examples: list[Example], *, step_chars: int, k: int, max_new_tokens: int,
                    temperature: float = 1.0) -> list[StepItem]:
    """Direct-Advantage-PO's offline data: one sampled response per prompt, cut into steps, each step with
    A(s, a) = V̂(s ⊕ a) − V̂(s) (the value after the last step is the response's own score)."""
    gen = engine.generate([e.prompt for e in examples], n=1, max_new_tokens=max_new_tokens, temperature=temperature)
    plans = []  # (example, steps, whether the response ended with EOS)
    for e, text, cut in zip(examples, gen.texts, gen.truncated.tolist()):
        plans.append((e, split_steps(text, step_chars), not cut))
    states = [(e, "".join(steps[:i])) for e, steps, _ in plans for i in range(len(steps))]
    values = iter(prefix_values(engine, task, states, k=k, max_new_tokens=max_new_tokens, temperature=temperature))
    items = []
    for e, steps, ended in plans:
        v = [next(values) for _ in steps] + [task.score("".join(steps), e)]
        for i, step in enumerate(steps):
            last = i == len(steps) - 1
            items.append(StepItem(e.prompt + "".join(steps[:i]), step, last and ended, v[i + 1] - v[i]))
    return items


def sibling_pairs(engine, task: Task, examples: list[Example], rng: random.Random, *, step_chars: int,
                  children: int, k: int, max_new_tokens: int, temperature: float = 1.0) -> list[SiblingPair]:
    """MCTS-DPO's step-level pairs from a two-level tree: one sampled response per prompt is cut at a random
    step boundary s; `children` next steps are sampled from s and valued by V̂(s ⊕ child); the pair is the best
    vs the worst child by value. Returns a `SiblingPair` for each state whose children differ in value."""
    gen = engine.generate([e.prompt for e in examples], n=1, max_new_tokens=max_new_tokens, temperature=temperature)
    states = []
    for e, text in zip(examples, gen.texts):
        steps = split_steps(text, step_chars)
        states.append((e, "".join(steps[:rng.randrange(len(steps))])))
    kids = engine.generate([e.prompt + s for e, s in states], n=children, max_new_tokens=step_chars,
                           temperature=temperature)
    C = children
    leaves = [(e, s + kids.texts[i * C + j]) for i, (e, s) in enumerate(states) for j in range(C)]
    ended = [not t for t in kids.truncated.tolist()]
    open_leaves = [i for i, done in enumerate(ended) if not done]
    open_values = prefix_values(engine, task, [leaves[i] for i in open_leaves], k=k, max_new_tokens=max_new_tokens,
                                temperature=temperature)
    q = [task.score(text, e) for e, text in leaves]
    for i, v in zip(open_leaves, open_values):
        q[i] = v
    pairs = []
    for i, (e, s) in enumerate(states):
        rows = range(i * C, (i + 1) * C)
        w = max(rows, key=lambda r: (q[r], -len(leaves[r][1])))  # best value, then shorter
        l = min(rows, key=lambda r: (q[r], -len(leaves[r][1])))
        if q[w] > q[l]:  # equal values: no preference between the siblings
            pairs.append(SiblingPair(e.prompt + s, leaves[w][1][len(s):], leaves[l][1][len(s):], ended[w], ended[l],
                                     q[w], q[l]))
    return pairs
