"""What every reward function shares: TRL's calling convention and the columns our pipeline adds to it.

A reward function is `fn(completions, **columns) -> list[float | None]` (TRL's `reward_funcs` signature); None
means "not applicable to this row" (TRL turns it into NaN and leaves the row out of that reward's mean).
`completions` arrive as plain strings from our pipeline and from TRL's standard format, or as lists of chat
messages from TRL's conversational format; `texts` reads both.

Columns our pipeline passes (TRL passes the dataset's columns, `completion_ids`, `trainer_state`, `log_metric`):

    prompts          list[str]          the prompt text of each row
    completion_ids   list[list[int]]    the policy's tokens of each row (EOS included)
    answer, target   list[str]          the example's gold answer and one correct completion
    solution         list[str]          = answer (TRL's and open-r1's name for it)
    scores           list[float]        the environment's verifier reward of the row (1.0 = solved)
    truncated        list[bool]         no EOS within max_new_tokens
    turn_info        list[list[dict]]   per row, per step: {"action": text, "state", "tool_error", ...}
    max_new_tokens, step, total_steps   ints: the run's generation budget and training progress
    log_metric       fn(name, value)    logs `rewards/<reward>/<name>` in the step's row
"""
from __future__ import annotations

import math
from typing import Any

import torch


def texts(completions) -> list[str]:
    """Completion texts: a string is itself; a conversational completion (a list of messages) is what the policy
    wrote: its assistant messages' contents, one per line (TRL's one-message form gives that message's content;
    tool results are not the policy's text)."""
    out = []
    for c in completions:
        if isinstance(c, str):
            out.append(c)
        elif isinstance(c, (list, tuple)) and all(isinstance(m, dict) for m in c):
            out.append("\n".join(str(m.get("content") or "") for m in c if m.get("role", "assistant") == "assistant"))
        else:
            raise TypeError(f"a completion is a string or a list of chat messages, got {type(c).__name__}: {c!r:.80}")
    return out


def column(columns: dict, *names: str, required: str = "") -> Any:
    """The first of `names` present in `columns` (aliases: "answer", "solution"); None when absent, or a
    ValueError naming the reward `required` and the columns it was given."""
    for name in names:
        if columns.get(name) is not None:
            return columns[name]
    if required:
        raise ValueError(f"reward {required!r} needs a {' or '.join(repr(n) for n in names)} column; it got "
                         f"{sorted(k for k in columns if columns[k] is not None)}")
    return None


def solved(scores, expected: int | None = None):
    """The environment's verdict per row: score >= 1 (1.0 = solved). A list gives list[bool | None] (a None or NaN
    score is no verdict: None); a tensor [B] gives a bool tensor [B] (NaN >= 1 is False: unsolved). `expected`: the
    number of rows the caller has; a `scores` of another length is a ValueError."""
    if expected is not None and len(scores) != expected:
        raise ValueError(f"scores has {len(scores)} rows for {expected} completions: give one verifier score per row")
    if isinstance(scores, torch.Tensor):
        return scores >= 1.0
    return [None if s is None or math.isnan(float(s)) else float(s) >= 1.0 for s in scores]


CORRECTNESS_VERIFIERS = ("auto", "math")  # `correctness`: scores, else the exact verifier; scores, else math-verify


def correctness(completions, *, reward: str, verifier: str = "math", **columns) -> list[bool | None]:
    """Whether each completion is right: the environment's verdict (`solved(scores)`) when our pipeline passes it,
    else `accuracy.verify_answer` of the text against `answer` / `solution` (None: the gold does not parse) by
    `verifier`: "math" math-verify (TRL accuracy_reward's configuration; it reads no toy answer such as "A:26"),
    "auto" the dependency-free exact verifier (`accuracy.exact_verify_answer`, which does)."""
    if verifier not in CORRECTNESS_VERIFIERS:
        raise ValueError(f"reward {reward!r}: verifier must be 'auto' (scores, else the exact verifier) or 'math' "
                         f"(scores, else math-verify), got {verifier!r}")
    scores = columns.get("scores")
    if scores is not None:
        verdicts = solved(scores, expected=len(completions))
        return verdicts.tolist() if isinstance(verdicts, torch.Tensor) else verdicts
    from workbench.rewards.accuracy import verify_answer  # lazy: accuracy registers rewards on import

    gold = column(columns, "answer", "solution", required=reward)
    mode = "math" if verifier == "math" else "exact"
    return [verify_answer(text, g, verifier=mode) for text, g in zip(texts(completions), gold, strict=True)]


def training_step(columns: dict) -> tuple[int, int | None]:
    """(t, T): the training step and the run's length in steps, from our `step` / `total_steps` columns or TRL's
    `trainer_state` (global_step / max_steps); t = 0 and T = None where neither says."""
    state = columns.get("trainer_state")
    step, total = columns.get("step"), columns.get("total_steps")
    if step is None and state is not None:
        step = state.global_step
    if total is None and state is not None:
        total = state.max_steps
    return step or 0, total or None


def training_progress(*, step=None, total_steps=None, trainer_state=None, **_) -> float:
    """t / T in [0, 1] (`training_step`); 0 when the run's length is unknown."""
    t, total = training_step({"step": step, "total_steps": total_steps, "trainer_state": trainer_state})
    return min(max(t / total, 0.0), 1.0) if total else 0.0


def actions(completions, turn_info=None, **_) -> list[list[str]]:
    """Per row, the text of each action the policy took: the steps' `action` from `turn_info`, or, for a
    one-turn row (or TRL, which passes no turn_info), the completion itself."""
    if turn_info is not None and len(turn_info) != len(completions):
        raise ValueError(f"turn_info has {len(turn_info)} rows for {len(completions)} completions (one per row)")
    out = []
    for i, text in enumerate(texts(completions)):
        steps = turn_info[i] if turn_info is not None and i < len(turn_info) else None
        out.append([s.get("action", "") for s in steps] if steps else [text])
    return out


def log(columns: dict, name: str, value: float) -> None:
    """Log a scalar through the caller's `log_metric` (ours and TRL's); silently nothing when called directly."""
    fn = columns.get("log_metric")
    if fn is not None:
        fn(name, float(value))
