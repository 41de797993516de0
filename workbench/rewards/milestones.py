"""RL4MLE's milestone partial credit, on calculator episodes; and the calculator-transcript helpers the process
rewards of this family share (`cm2-checklist`, `ssl`'s progress signal).

    r = score                                   if the run succeeds (solved)
    r = sum_k v_k [milestone k reached]          otherwise,  v_k = total * k / (K (K + 1) / 2),  total < 1

In the paper (abstract only) a frozen LM inserts print statements into the agent's ML program; the milestones it
logs (data loaded, model trained, predictions written, ...) give partial credit when the program yields no final
score. Toy stand-in: a calculator episode's milestones are the intermediate results of the expert's solution
(`solve_steps`), reached when a tool call of the episode produced that value.
"""
from __future__ import annotations

import re

from workbench import registry
from workbench.envs.calculator import CALL, MAX_OPERAND_CHARS, apply, first_operation
from workbench.rewards import base

KEY = "rl4mle-milestones"
EXPRESSION = re.compile(r"\d{1,12}(?:[+\-*]\d{1,12})+")  # an operator starts every repeat: no backtracking blow-up
MAX_EXPRESSION_CHARS = 200  # a longer prompt is not a calculator example
MAX_INLINE_CALLS = 1000     # steps cut from one text: far beyond any episode's turns, bounds the work on junk


# ----------------------------------------------------------------------------- calculator transcripts

def expression_of(prompt) -> str | None:
    """The arithmetic expression of a calculator prompt ("37*48+19=" -> "37*48+19"), else None."""
    if not isinstance(prompt, str):
        return None
    text = prompt.strip().removesuffix("=")
    if len(text) > MAX_EXPRESSION_CHARS or not EXPRESSION.fullmatch(text):
        return None
    return text


def solution_steps(prompt) -> list[tuple[int, tuple[int, ...]]]:
    """The expert's calls for a calculator prompt, in order, as (result, indices of the earlier steps whose
    results it takes as operands): "2*3+4*5=" -> [(6, ()), (20, ()), (26, (0, 1))]. [] for any other prompt.
    Evaluation order is the calculator's (`first_operation`: leftmost *, else leftmost + or -)."""
    expression = expression_of(prompt)
    if expression is None:
        return []
    tokens = re.findall(r"\d+|[+\-*]", expression)
    values = [t if t in "+-*" else int(t) for t in tokens]
    source = [None] * len(values)  # which step produced each operand (None: a number of the prompt)
    steps = []
    while len(values) > 1:
        i = first_operation(values)
        a, op, b = values[i - 1], values[i], values[i + 1]
        result = apply(a, op, b)
        steps.append((result, tuple(s for s in (source[i - 1], source[i + 1]) if s is not None)))
        values[i - 1:i + 2], source[i - 1:i + 2] = [result], [len(steps) - 1]
    return steps


def call_result(text: str) -> int | None:
    """What the calculator answers to one action: the value of a well-formed call "[a op b]" (the env's rule:
    the whole stripped action, operands of at most MAX_OPERAND_CHARS), else None (an error or an answer)."""
    call = CALL.fullmatch(text.strip())
    if call is None or max(len(call.group(1)), len(call.group(3))) > MAX_OPERAND_CHARS:
        return None
    return apply(int(call.group(1)), call.group(2), int(call.group(3)))


def transcript_steps(text: str, *, limit=MAX_INLINE_CALLS) -> list[str]:
    """A whole transcript given as one completion (as TRL passes it), cut into steps the way the calculator's
    stop string "]" cuts actions: each piece ends at a "]" (observations ride at the start of the next piece),
    the rest is the last step; at most `limit` cuts."""
    pieces, start = [], 0
    while len(pieces) < limit:
        end = text.find("]", start)
        if end < 0:
            break
        pieces.append(text[start:end + 1])
        start = end + 1
    rest = text[start:]
    return pieces + [rest] if rest.strip() or not pieces else pieces


def step_results(actions: list[str], *, inline: bool) -> list[int | None]:
    """Per step, the tool result it produced (None: no call, or an error): each action as the calculator env reads
    it, or, `inline` (pieces of `transcript_steps`), the call that ends the piece."""
    if inline:
        return [call_result(a[a.rfind("["):]) if a.rstrip().endswith("]") else None for a in actions]
    return [call_result(a) for a in actions]


def episode_actions(completions, columns: dict) -> tuple[list[list[str]], bool]:
    """(per row, the texts of its steps; whether they were cut from plain completions rather than read from
    `turn_info`, our multi-turn rollout's record of each action)."""
    turn_info = columns.get("turn_info")
    if turn_info is None:
        return [transcript_steps(text) for text in base.texts(completions)], True
    return base.actions(completions, turn_info), False


# ----------------------------------------------------------------------------- the reward

def milestone_values(k: int, *, total=0.6) -> list[float]:
    """v_1..v_K, increasing in k and summing to `total`: v_k = total * k / (K (K + 1) / 2); (0.1, 0.2, 0.3) for
    K = 3 and total 0.6 (the catalog's values)."""
    return [total * (j + 1) / (k * (k + 1) / 2) for j in range(k)]


def milestone_reward(solved: bool, score: float, reached: list[bool], *, total=0.6) -> float:
    """r = score when solved, else the partial credit sum_k v_k [reached_k] (< total < 1 <= any success)."""
    if solved:
        return float(score)
    values = milestone_values(len(reached), total=total)
    return sum((v for v, hit in zip(values, reached) if hit), 0.0)


@registry.reward(
    KEY, title="Reinforcement Learning for Machine Learning Engineering Agents",
    summary="Partial credit from milestones reached when the run does not succeed: sum_k v_k over the ordered "
            "milestones logged (v = 0.1, 0.2, 0.3 for three; sum 0.6 < any success). Toy stand-in: a calculator "
            "episode's milestones are the expert's intermediate results produced by its tool calls.",
    equation=r"r = \begin{cases} s & \text{solved} \\ \sum_k v_k\,[m_k\ \text{reached}],\ "
             r"v_k = \frac{0.6\,k}{K(K+1)/2} & \text{otherwise} \end{cases}")
def milestones_reward(completions, *, total=0.6, **columns) -> list[float | None]:
    """Per row: its `scores` value (1.0 without `scores`) when solved, else the milestone credit; None when
    correctness is unknown (no `scores`, and the gold answer does not parse).

    Reads `prompts` (the milestones: `solution_steps`), `scores` or `answer` (success: `base.correctness`), and
    `turn_info` (each step's action; without it the completion is cut into steps at each "]"). A one-turn episode or
    a prompt that is no calculator expression has no milestones: r = score or 0.

    total = sum_k v_k = 0.6 (Our reading: the catalog's v = (0.1, 0.2, 0.3), abstract-only; the paper's values are
    not known); it must stay in [0, 1) so any solved run (score >= 1) outranks any partial one. Logs
    `reached_frac`, the share of milestones reached over the rows that have any.
    """
    if not 0 <= total < 1:
        raise ValueError(f"{KEY}: total (the most partial credit) must be in [0, 1) so any success outranks it, "
                         f"got {total}")
    prompts = base.column(columns, "prompts", required=KEY)
    correct = base.correctness(completions, reward=KEY, **columns)
    scores = columns.get("scores")
    actions, inline = episode_actions(completions, columns)
    out, reached_count, milestone_count = [], 0, 0
    for i, (prompt, ok) in enumerate(zip(prompts, correct, strict=True)):
        if ok is None:
            out.append(None)
            continue
        produced = set(step_results(actions[i], inline=inline)) - {None}
        reached = [value in produced for value, _ in solution_steps(prompt)]
        reached_count, milestone_count = reached_count + sum(reached), milestone_count + len(reached)
        out.append(milestone_reward(ok, scores[i] if scores is not None else 1.0, reached, total=total))
    if milestone_count:
        base.log(columns, "reached_frac", reached_count / milestone_count)
    return out
