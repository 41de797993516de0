"""RL4MLE's milestone partial credit, on calculator episodes; and the calculator-transcript helpers the process
rewards of this family share (`cm2-checklist`, `ssl`'s progress signal).

    r = score                                   if the run succeeds (solved)
    r = sum_k v_k [milestone k reached]          otherwise,  v_k = total * k / (K (K + 1) / 2),  total < 1

In the paper (abstract only) a frozen LM inserts print statements into the agent's ML program; the milestones it
logs (data loaded, model trained, predictions written, ...) give partial credit when the program yields no final
score. Toy stand-in: a calculator episode's milestones are the intermediate results of the expert's solution
(`solution_steps`), reached when a tool call of the episode produced that value.
"""
from __future__ import annotations

import re

from workbench import registry
from workbench.rewards import base
from workbench.rewards.tools import bracket_call
from workbench.text.arithmetic import call_result, solve_trace

KEY = "rl4mle-milestones"
EXPRESSION = re.compile(r"\d{1,12}(?:[+\-*]\d{1,12})+")  # an operator starts every repeat: no backtracking blow-up
MAX_EXPRESSION_CHARS = 200  # a longer prompt is not a calculator example
MAX_INLINE_CALLS = 1000     # steps cut from one text: far beyond any episode's turns, bounds the work on junk

# ----------------------------------------------------------------------------- calculator transcripts

def prompt_text(prompt) -> str | None:
    """The text of a prompt: a string is itself; a conversational prompt (TRL: a list of chat messages) is its
    last user message's content (a system message before it is not the question); None for anything else."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, (list, tuple)):
        users = [m for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
        return str(users[-1].get("content") or "") if users else None
    return None


def expression_of(prompt) -> str | None:
    """The arithmetic expression of a calculator prompt ("37*48+19=" -> "37*48+19", plain or conversational), else
    None."""
    text = prompt_text(prompt)
    if text is None:
        return None
    text = text.strip().removesuffix("=")
    if len(text) > MAX_EXPRESSION_CHARS or not EXPRESSION.fullmatch(text):
        return None
    return text


def solution_steps(prompt) -> list[tuple[int, tuple[int, ...]]]:
    """The expert's calls for a calculator prompt, in order, as (result, indices of the earlier steps whose
    results it takes as operands): "2*3+4*5=" -> [(6, ()), (20, ()), (26, (0, 1))]. [] for any other prompt.
    The calculator's own evaluation (`solve_trace`: leftmost *, else leftmost + or -)."""
    expression = expression_of(prompt)
    return [] if expression is None else [(value, sources) for *_, value, sources in solve_trace(expression)]


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
    it, or, `inline` (pieces of `transcript_steps`), the bracket call that closes the piece (`tools.bracket_call`)."""
    if inline:
        return [call_result(a[a.rfind("["):]) if bracket_call(a.rstrip()) else None for a in actions]
    return [call_result(a) for a in actions]


def reached_milestones(actions: list[str], prompt, *, inline: bool) -> list[bool]:
    """Per intermediate result of the expert's solution (`solution_steps`), whether a tool call of the episode
    produced it ([] for a prompt that is no calculator expression)."""
    produced = set(step_results(actions, inline=inline)) - {None}
    return [value in produced for value, _ in solution_steps(prompt)]


def structured_tool_calls(completion) -> bool:
    """Does a conversational completion carry structured `tool_calls` (TRL's tool-calling format)?"""
    return isinstance(completion, (list, tuple)) and any(
        isinstance(m, dict) and m.get("tool_calls") for m in completion)


def episode_actions(completions, columns: dict, *, reward: str) -> tuple[list[list[str]], bool]:
    """(per row, the texts of its steps; whether they were cut from plain completions rather than read from
    `turn_info`, our multi-turn rollout's record of each action). Without `turn_info`, a completion whose messages
    carry structured `tool_calls` is refused: its calls are not in its text, so reading the text would silently
    find no step."""
    turn_info = columns.get("turn_info")
    if turn_info is not None:
        return base.actions(completions, turn_info), False
    rows = [i for i, c in enumerate(completions) if structured_tool_calls(c)]
    if rows:
        raise ValueError(f"reward {reward!r} reads calculator calls written in the text ('[a op b]'); rows "
                         f"{rows[:10]} carry structured tool_calls, which it cannot read: pass the episode as text "
                         "(the calls in the assistant messages' content) or our rollout's turn_info")
    return [transcript_steps(text) for text in base.texts(completions)], True


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


MILESTONES_LOGS = {
    "rewards/rl4mle-milestones/reached_frac": ("RL4MLE: share of milestones (the expert's intermediate results) the "
                                               "episodes' tool calls reached.",
                                               "Rising with training; a plateau below 1 with accuracy flat: the runs "
                                               "stall at the same milestone."),
}


@registry.reward(
    KEY, title="Reinforcement Learning for Machine Learning Engineering Agents",
    summary="Partial credit from milestones reached when the run does not succeed: sum_k v_k over the ordered "
            "milestones logged (v = 0.1, 0.2, 0.3 for three; sum 0.6 < any success). Toy stand-in: a calculator "
            "episode's milestones are the expert's intermediate results produced by its tool calls.",
    equation=r"r = \begin{cases} s & \text{solved} \\ \sum_k v_k\,[m_k\ \text{reached}],\ "
             r"v_k = \frac{0.6\,k}{K(K+1)/2} & \text{otherwise} \end{cases}", logs=MILESTONES_LOGS,
    choices={"verifier": base.CORRECTNESS_VERIFIERS})
def milestones_reward(completions, *, total=0.6, verifier="auto", **columns) -> list[float | None]:
    """Per row: its `scores` value (1.0 without `scores`) when solved, else the milestone credit; None when
    correctness is unknown (no `scores`, and the gold answer does not parse).

    Reads `prompts` (the milestones: `solution_steps`; plain or conversational), `scores` or `answer` (success:
    `base.correctness`), and `turn_info` (each step's action; without it the completion is cut into steps at each
    "]"). A prompt that is no calculator expression has no milestones, and a one-turn episode makes no tool call,
    so reaches none of its prompt's milestones ("3+4=" has one, 7): either way r = score or 0.
    verifier: how success is judged without `scores` (TRL): "auto" the dependency-free exact verifier (reads the
    toy's "A:26"), "math" math-verify (`base.correctness`).

    total = sum_k v_k = 0.6 (Our reading: the catalog's v = (0.1, 0.2, 0.3), abstract-only; the paper's values are
    not known); it must stay in [0, 1) so any solved run (score >= 1) outranks any partial one. Logs
    `reached_frac`, the share of milestones reached over the rows that have any.
    """
    if not 0 <= total < 1:
        raise ValueError(f"{KEY}: total (the most partial credit) must be in [0, 1) so any success outranks it, "
                         f"got {total}")
    prompts = base.column(columns, "prompts", required=KEY)
    correct = base.correctness(completions, reward=KEY, verifier=verifier, **columns)
    scores = columns.get("scores")
    actions, inline = episode_actions(completions, columns, reward=KEY)
    out, reached_count, milestone_count = [], 0, 0
    for i, (prompt, ok) in enumerate(zip(prompts, correct, strict=True)):
        if ok is None:
            out.append(None)
            continue
        reached = reached_milestones(actions[i], prompt, inline=inline)
        reached_count, milestone_count = reached_count + sum(reached), milestone_count + len(reached)
        out.append(milestone_reward(ok, scores[i] if scores is not None else 1.0, reached, total=total))
    if milestone_count:
        base.log(columns, "reached_frac", reached_count / milestone_count)
    return out
