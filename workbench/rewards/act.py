"""Agentic Critical Training (ACT): reward for picking the expert action among two candidates.

For states from expert trajectories, the expert's action a* is paired with an alternative a' (in the paper, a
sample of the initial policy); the policy sees the state and both candidates, labelled A and B in random order,
reasons freely, and names the better one. GRPO trains it on

    r = 1[the chosen candidate is a*],   pairs with a' = a* left out (nothing to judge).

A judge that picks at random earns 1/2 in expectation; one that judges by the candidates' content earns the same
under either presentation order. No reference implementation was located (confidence partial, from a secondary
source); the labels and the answer parsing are our reading (`parse_choice`). The pairs are built here
(`critic_pairs`, `present`) and turned into a task by `workbench.tasks.act` (states of the grid world's expert
paths, the alternative a strictly worse move), whose `answer` is the letter of a*.
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

from workbench import registry
from workbench.rewards import base

TITLE = "Agentic Critical Training"
LABELS = ("A", "B")
ANSWER_MARK = "answer"
MARK_WINDOW = 40  # characters after the last "answer" searched for the label ("Answer: (B)", "answer is A")


@dataclass(frozen=True)
class CriticPair:
    state: str
    expert: str        # a*
    alternative: str   # a'


def critic_pairs(states: Sequence[str], experts: Sequence[str], alternatives: Sequence[str]) -> list[CriticPair]:
    """(state, a*, a') triples as pairs, leaving out those whose alternative is the expert's action (stripped
    text equal): they carry no preference."""
    if not len(states) == len(experts) == len(alternatives):
        raise ValueError(f"critic_pairs: {len(states)} states, {len(experts)} expert actions, {len(alternatives)} "
                         "alternatives")
    return [CriticPair(s, a, b) for s, a, b in zip(states, experts, alternatives) if a.strip() != b.strip()]


def present(pair: CriticPair, rng: random.Random, labels: Sequence[str] = LABELS) -> tuple[tuple[str, str], str]:
    """((candidate under labels[0], candidate under labels[1]), label of a*): a fair coin orders the two."""
    if rng.random() < 0.5:
        return (pair.expert, pair.alternative), labels[0]
    return (pair.alternative, pair.expert), labels[1]


@lru_cache(maxsize=16)
def closing_label(labels: tuple[str, ...]) -> re.Pattern:
    """A label that closes a statement: not part of a longer word or number, and followed by the end of its line,
    punctuation or ")" ("B", "Answer: (B)", "I pick B." but not the article of "A wall blocks"). One alternation,
    lookarounds of a bounded character class: linear in the text."""
    alternation = "|".join(re.escape(label) for label in sorted(labels, key=len, reverse=True))
    return re.compile(rf"(?<![A-Za-z0-9])(?:{alternation})(?=[ \t]*(?:\n|\Z)|[.,;:!?)\]*\"'])")


def parse_choice(text: str, labels: Sequence[str] = LABELS) -> str | None:
    """The label the judge chose: the first closing label (`closing_label`) within `MARK_WINDOW` characters after the
    last "answer" (any case), else the last closing label of the text (a bare "B" on the last line, "... so B."),
    else None. A label followed by more words ("A wall blocks", "B is wrong") is prose, not a choice."""
    pattern = closing_label(tuple(labels))
    at = text.lower().rfind(ANSWER_MARK)
    if at >= 0:
        start = at + len(ANSWER_MARK)
        hit = pattern.search(text, start)  # not endpos: the window's end is no end of text
        if hit and hit.start() < start + MARK_WINDOW:
            return hit.group(0)
    last = None
    for last in pattern.finditer(text):
        pass
    return last.group(0) if last else None


def check_labels(labels) -> tuple[str, ...]:
    labels = tuple(labels)
    if len(labels) != 2 or len(set(labels)) != 2 or not all(isinstance(x, str) and x.strip() == x and x
                                                            for x in labels):
        raise ValueError(f"act: labels must be two distinct non-empty strings without surrounding spaces, got "
                         f"{labels!r}")
    return labels


ACT_LOGS = {
    "rewards/act/parsed": ("ACT: share of critic rows whose completion names one of the two candidates.",
                           "Near 1 after the warm start. Falling: the judge stops naming a candidate (format drift)."),
    "rewards/act/first_label": ("ACT: share of parsed choices naming the first-listed candidate (A).",
                                "About 0.5 (the order is a fair coin). Far from it: a position bias, not judgement."),
}


@registry.reward(
    "act", title=TITLE,
    summary="Judge reward: 1 iff the completion names (A/B, 'Answer: B') the expert's action among the two "
            "candidates of the prompt; gold label from the `answer` column; None for rows that carry no label.",
    equation=r"r = \mathbb{1}\big[\mathrm{choice}(y) = \mathrm{label}(a^*)\big],\quad "
             r"\text{pairs with } a' = a^* \text{ removed}", logs=ACT_LOGS)
def act_reward(completions, *, labels=LABELS, **columns) -> list[float | None]:
    """1.0 if `parse_choice` of the completion is the row's gold label (`answer`, or TRL's `solution`), 0.0 if
    it names the other candidate or none; None where the gold is not one of `labels` (not a critic row).

    Logs rewards/act/parsed (share of critic rows with a parseable choice) and rewards/act/first_label (share of
    parsed choices naming labels[0]: about 1/2 for a judge without position bias, as the order is a fair coin).
    """
    labels = check_labels(labels)
    gold = [str(g).strip() for g in base.column(columns, "answer", "solution", required="act")]
    choices = [parse_choice(t, labels) for t in base.texts(completions)]
    rows = [(c, g) for c, g in zip(choices, gold, strict=True) if g in labels]
    if rows:
        parsed = [c for c, _ in rows if c is not None]
        base.log(columns, "parsed", len(parsed) / len(rows))
        if parsed:
            base.log(columns, "first_label", sum(c == labels[0] for c in parsed) / len(parsed))
    return [float(c == g) if g in labels else None for c, g in zip(choices, gold, strict=True)]
