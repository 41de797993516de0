"""AdaSearch's reward for the search-or-not decision, and its F1_aware metric.

AdaSearch (arXiv 2512.16883) trains, in a second stage, an explicit decision "answer from parametric knowledge"
vs "search": the decision is rewarded iff it matches whether the question is solvable parametrically, an oracle
label taken from the correctness of the stage-1 parametric mode (no search). No tool-call-count penalty.

    d_i = 1[row i made no search call]         (the decision; positive class = "no search needed")
    o_i = 1[row i's question is solvable parametrically]
    r_i = 1[d_i = o_i] + r_ans,i               (r_ans: exact match, the environment's verifier)
    F1_aware = 2 TP / (2 TP + FP + FN) of d against o

Confidence abstract-only: the official repository (hank0316/AdaSearch, commit e15f01c9) holds a README and a SkyRL
submodule pinned at upstream NovaSky-AI/SkyRL bd9d6a9b, no reward code, so the formulas follow the catalog.
Our reading: the answer term is exact match, the environment's verifier (SkyRL's search environment, on which
AdaSearch builds, scores exact match: skyrl_gym/envs/search/utils.py `compute_score`, Search-R1's `em_check`);
the two terms are summed with weight 1 each.

The oracle o_i, in order:
  - `oracle(prompt, answer) -> bool | None`, a callable hyper-parameter (e.g. a lookup of the stage-1 model's
    parametric-mode results);
  - a `parametric_correct` column (bool, or the share of parametric-mode samples that were right; solvable iff
    >= 0.5), AdaSearch's label as a dataset column (TRL passes dataset columns through);
  - otherwise (toy stand-in, our reading) the parametric mode as observed in the batch: rows with the same prompt
    form a group, and the question is solvable iff some row of the group answered correctly without searching;
    unknown (decision term 0) when every row of the group searched. On a one-turn task (no tool) every row is
    parametric, so the oracle is "some sample of the prompt is right"; on the search environment (every example
    has its own random corpus) a row that skips search is almost never right, so searching is the right call.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Callable, Sequence

from workbench import registry
from workbench.rewards import base
from workbench.rewards.tools import calls

TITLE = ("AdaSearch: Balancing Parametric Knowledge and Search in Large Language Models via Reinforcement "
         "Learning")
ORACLE_COLUMN = "parametric_correct"


# ----------------------------------------------------------------------------- the oracle

def column_labels(columns: dict) -> list[bool | None] | None:
    """The `parametric_correct` column as solvability labels (None where a row has none), or None without it: a
    bool, or the share of parametric-mode samples that were right (solvable iff >= 0.5)."""
    values = columns.get(ORACLE_COLUMN)
    if values is None:
        return None
    labels = []
    for row, value in enumerate(values):
        try:
            share = None if value is None else float(value)
        except (TypeError, ValueError):
            share = float("nan")
        if share is not None and not 0.0 <= share <= 1.0:
            raise ValueError(f"adasearch: column {ORACLE_COLUMN!r} holds a bool or a share in [0, 1]; row {row} is "
                             f"{value!r}")
        labels.append(None if share is None else share >= 0.5)
    return labels


def group_oracle(keys: Sequence, searched: Sequence[bool], correct: Sequence[bool | None]) -> list[bool | None]:
    """Per row, its question's parametric solvability as seen in its group (rows with the same key): True if a
    row of the group answered correctly without searching, False if rows skipped search and all were wrong, None
    if no row of the group skipped search (rows of unknown correctness do not count)."""
    seen = defaultdict(list)
    for key, s, c in zip(keys, searched, correct, strict=True):
        if not s and c is not None:
            seen[key].append(c)
    return [any(seen[key]) if seen[key] else None for key in keys]


def parametric_oracle(searched, correct, columns: dict, *, oracle: Callable | None = None, labels=None) -> list:
    """o_i (True: solvable parametrically; None: unknown) from the callable, the column's `labels`, or the group
    (see the module docstring)."""
    n = len(searched)
    if oracle is not None:
        prompts = columns.get("prompts") or [""] * n
        answers = base.column(columns, "answer", "solution") or [""] * n
        return [None if (o := oracle(p, a)) is None else bool(o) for p, a in zip(prompts, answers, strict=True)]
    if labels is not None:
        return list(labels)
    keys = columns.get("prompts") or list(range(n))  # no prompts: every row its own question
    return group_oracle([str(k) for k in keys], searched, correct)


# ----------------------------------------------------------------------------- F1_aware

def f1_aware(no_search: Sequence[bool], solvable: Sequence[bool]) -> float:
    """F1 of the decisions "no search" against the oracle "solvable parametrically" (the positive class):
    2 TP / (2 TP + FP + FN). 1 for a perfect decider; 0 for one that always searches (TP = 0) when some question
    is solvable. With nothing to find and nothing wrongly claimed (TP = FP = FN = 0) it is 1: the decider is
    perfect there."""
    if len(no_search) != len(solvable):
        raise ValueError(f"f1_aware: {len(no_search)} decisions for {len(solvable)} oracle labels")
    tp = sum(bool(d) and bool(o) for d, o in zip(no_search, solvable))
    fp = sum(bool(d) and not o for d, o in zip(no_search, solvable))
    fn = sum(not d and bool(o) for d, o in zip(no_search, solvable))
    return 1.0 if 2 * tp + fp + fn == 0 else 2 * tp / (2 * tp + fp + fn)


# ----------------------------------------------------------------------------- the reward

ADASEARCH_LOGS = {
    "rewards/adasearch/search_rate": ("AdaSearch: share of rows that made a search (tool) call.",
                                      "Settles at the share of questions that need search. Towards 1: searching "
                                      "everything (Search-R1's habit); towards 0 while accuracy falls: guessing."),
    "rewards/adasearch/decision_acc": ("AdaSearch: share of rows (oracle known) whose search-or-not decision matches "
                                       "whether the question is solvable without search.",
                                       "Rising towards 1. Stuck near the share of the majority class: the decision "
                                       "ignores the question (always or never searching)."),
    "rewards/adasearch/f1_aware": ("AdaSearch's F1_aware: F1 of the 'no search' decisions against 'solvable "
                                   "parametrically' (the positive class), over rows with a known oracle.",
                                   "Rising towards 1. 0: the policy never skips search on a question it could answer "
                                   "(or always skips wrongly)."),
}


@registry.reward(
    "adasearch", title=TITLE,
    summary="r = 1[decision = oracle] + EM: the search-or-not decision (a tool call or not) is rewarded iff it "
            "matches whether the question is solvable parametrically (a column, a callable, or toy stand-in: "
            "a no-search row of the same prompt was right); logs F1_aware of the decisions.",
    equation=r"r_i = \mathbb{1}\big[\,d_i = o_i\,\big] + \mathrm{EM}_i,\quad d_i = \mathbb{1}[\text{no search}],\ "
             r"o_i = \mathbb{1}[\text{solvable parametrically}]", logs=ADASEARCH_LOGS)
def adasearch_reward(completions, *, oracle: Callable | None = None, **columns) -> list[float | None]:
    """AdaSearch's stage-2 reward per row (module docstring); None where the answer's correctness is unknown.

    The decision is "searched" iff the row made a tool call that ran (`tools.calls`: the episode's actions from
    `turn_info`, a TRL conversational completion's `tool_calls`, or the calls written in the completion's text,
    "[Bov]", "<search>q</search>"; a call the environment rejected retrieved nothing and is no search; a one-turn
    row without a call decided to answer parametrically). The answer term is EM: `base.correctness` with
    verifier="auto", the environment's verdict `scores` (ours), else (TRL) the exact verifier on the final answer
    span against `answer` / `solution` ("A:46", "the answer is Paris"), not math-verify, which reads neither.
    A row whose oracle is unknown gets decision term 0. Logs rewards/adasearch/search_rate, and over rows with a
    known oracle decision_acc and f1_aware (positive class: no search needed).
    """
    if oracle is not None and not callable(oracle):
        raise ValueError(f"adasearch: oracle must be None or a callable (prompt, answer) -> bool, got {oracle!r}")
    labels = column_labels(columns)
    searched = [n > 0 for n in calls(completions, columns.get("turn_info"))]
    correct = base.correctness(completions, reward="adasearch", verifier="auto", **columns)  # EM without scores
    solvable = parametric_oracle(searched, correct, columns, oracle=oracle, labels=labels)
    decided_right = [None if o is None else (not s) == o for s, o in zip(searched, solvable, strict=True)]
    log_decisions(columns, searched, solvable)
    return [None if c is None else float(bool(d)) + float(c) for d, c in zip(decided_right, correct, strict=True)]


def log_decisions(columns: dict, searched: list[bool], solvable: list) -> None:
    if searched:
        base.log(columns, "search_rate", sum(searched) / len(searched))
    known = [(not s, o) for s, o in zip(searched, solvable) if o is not None]
    if known:
        no_search, labels = zip(*known)
        base.log(columns, "decision_acc", sum(d == o for d, o in known) / len(known))
        base.log(columns, "f1_aware", f1_aware(no_search, labels))
