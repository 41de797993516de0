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


def texts(completions) -> list[str]:
    """Completion texts: a string is itself; a conversational completion (a list of messages) is the
    content of its messages joined (TRL's one-message form gives that message's content)."""
    out = []
    for c in completions:
        if isinstance(c, str):
            out.append(c)
        elif isinstance(c, (list, tuple)) and all(isinstance(m, dict) for m in c):
            out.append("".join(str(m.get("content") or "") for m in c))
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


def correctness(completions, *, reward: str, **columns) -> list[bool | None]:
    """Whether each completion is right: the environment's verdict (`scores` >= 1) when our pipeline passes it,
    else `accuracy.verify_answer` of the text against `answer` / `solution` (None: the gold does not parse)."""
    scores = columns.get("scores")
    if scores is not None:
        return [None if s is None or (isinstance(s, float) and math.isnan(s)) else float(s) >= 1.0 for s in scores]
    from workbench.rewards.accuracy import verify_answer  # lazy: accuracy registers rewards on import

    gold = column(columns, "answer", "solution", required=reward)
    return [verify_answer(text, g) for text, g in zip(texts(completions), gold, strict=True)]


def training_progress(*, step=None, total_steps=None, trainer_state=None, **_) -> float:
    """t / T in [0, 1]: from our `step` / `total_steps`, or TRL's `trainer_state` (global_step / max_steps)."""
    if step is None and trainer_state is not None:
        step, total_steps = trainer_state.global_step, trainer_state.max_steps
    if step is None or not total_steps:
        return 0.0
    return min(max(step / total_steps, 0.0), 1.0)


def actions(completions, turn_info=None, **_) -> list[list[str]]:
    """Per row, the text of each action the policy took: the steps' `action` from `turn_info`, or, for a
    one-turn row (or TRL, which passes no turn_info), the completion itself."""
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
