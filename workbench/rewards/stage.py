"""The reward stage's plumbing: the columns a reward function gets, calling it safely, and what is logged."""
from __future__ import annotations

import math
from dataclasses import replace

import torch

from workbench.rewards.aggregate import nanstd


class RewardError(ValueError):
    """A reward function failed or answered out of contract; the message names it."""


def utf8_text(text) -> str:
    """A completion as valid UTF-8 text, so no reward function has to handle invalid text: bytes are decoded and
    undecodable bytes (also as `surrogateescape` keeps them, U+DC80..U+DCFF) become U+FFFD; any other lone
    surrogate becomes "?"."""
    if isinstance(text, bytes):
        return text.decode("utf-8", errors="replace")
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", errors="surrogateescape" if _escaped(text) else "replace").decode(
            "utf-8", errors="replace")


def _escaped(text: str) -> bool:
    return all(0xDC80 <= ord(ch) <= 0xDCFF for ch in text if 0xD800 <= ord(ch) <= 0xDFFF)


def reward_columns(batch, examples: list, ctx) -> dict:
    """Everything a reward function may read (see `workbench.rewards.base`), one entry per row: the columns
    `stages.PASSED["reward"]` names, less the metric logger `run_reward` adds."""
    rows = [examples[int(g)] for g in batch.group]
    answers = [e.answer for e in rows]
    return {
        "completions": [utf8_text(c) for c in batch.completions],
        "prompts": list(batch.prompts),
        "completion_ids": [r[m > 0].tolist() for r, m in zip(batch.response_ids, batch.mask)],
        "answer": answers, "solution": answers, "target": [e.target for e in rows],
        "scores": batch.scores.tolist(),
        "truncated": batch.truncated.tolist() if batch.truncated is not None else [False] * batch.size,
        "turn_info": batch.turn_info or None,
        "max_new_tokens": ctx.max_new_tokens, "step": ctx.step, "total_steps": ctx.total_steps,
    }


def run_reward(name: str, fn, columns: dict, kwargs: dict, metrics: dict) -> torch.Tensor:
    """fn's values [B] in float64 with None as NaN; a raise, a wrong length, a non-number or NaN/inf is a
    RewardError naming the reward, before anything is trained on them."""
    n = len(columns["completions"])

    def log_metric(metric: str, value: float) -> None:
        metrics[f"rewards/{name}/{metric}"] = float(value)

    try:
        values = fn(**columns, **kwargs, log_metric=log_metric)
    except Exception as err:  # noqa: BLE001  (any failure inside a user's function: name it)
        raise RewardError(f"reward {name!r} raised {type(err).__name__}: {err}") from err
    return reward_values(name, values, n)


def reward_values(name: str, values, n: int) -> torch.Tensor:
    """A reward function's return as [n] float64 (None as NaN), or a RewardError for a wrong length, a non-number
    or NaN/inf, naming the reward."""
    if values is None or not hasattr(values, "__len__") or len(values) != n:
        got = "None" if values is None else f"{len(values)} values" if hasattr(values, "__len__") else repr(values)
        raise RewardError(f"reward {name!r} returned {got} for {n} completions; it must return one float (or None) "
                          "per completion")
    out = []
    for i, v in enumerate(values):
        if v is None:
            out.append(math.nan)
            continue
        try:
            out.append(float(v))
        except (TypeError, ValueError):
            raise RewardError(f"reward {name!r} returned {v!r} for row {i}; a reward is a float or None") from None
    tensor = torch.tensor(out, dtype=torch.float64)
    bad = [i for i, v in enumerate(values) if v is not None and not math.isfinite(out[i])]
    if bad:
        raise RewardError(f"reward {name!r} returned NaN/inf for rows {bad[:10]}; return None for a row it does not "
                          "apply to")
    return tensor


def probe_columns(examples: list, max_new_tokens: int, total_steps: int) -> dict:
    """`reward_columns` for the task's own examples answered with their targets (one row each): what a reward gets
    on a step, without a batch, to check its return before anything is trained."""
    n = len(examples)
    return {"completions": [e.target for e in examples], "prompts": [e.prompt for e in examples],
            "completion_ids": [[0] * max(len(e.target), 1) for e in examples],
            "answer": [e.answer for e in examples], "solution": [e.answer for e in examples],
            "target": [e.target for e in examples], "scores": [1.0] * n, "truncated": [False] * n, "turn_info": None,
            "max_new_tokens": max_new_tokens, "step": 0, "total_steps": total_steps}


def check_return(name: str, fn, columns: dict, kwargs: dict) -> None:
    """Refuse, before anything is trained, a reward that returns the wrong number of values, a non-number or
    NaN/inf on the probe rows (`probe_columns`). A raise is not judged here: the probe's rows are stand-ins (no
    episode's turn info) that a reward may rightly refuse; a real step names such a raise."""
    try:
        values = fn(**columns, **kwargs, log_metric=lambda metric, value: None)
    except Exception:  # noqa: BLE001  the stand-in rows, not the reward, may be at fault: the step will tell
        return
    reward_values(name, values, len(columns["completions"]))


# What the reward stage logs of every recipe's rewards (`reward_metrics`): one pair per reward.
REWARD_METRICS = {
    "rewards/<name>/mean": ("Mean of one reward of the recipe ('task': the environment's verifier; otherwise the "
                            "reward function's key) over the rows it applies to, before weights and aggregation "
                            "(TRL's name).",
                            "Each on its own scale: the task's climbs with accuracy; a shaping reward (length, "
                            "format) that rises while the task's mean falls is being gamed."),
    "rewards/<name>/std": ("Std of that reward over the rows it applies to (Bessel-corrected, as TRL).",
                           "Above 0 while that reward still separates samples; 0 for a reward every sample maxes out."),
    "rewards/unscorable_frac": ("Share of rows no reward applies to (every reward returned None): masked out of the "
                                "update.",
                                "0 for rewards that always apply. Above 0: rows no reward scored (all None) train on "
                                "nothing."),
}


def reward_metrics(names: list[str], table: torch.Tensor, unscorable: torch.Tensor) -> dict:
    """rewards/<name>/mean|std over the rows each reward applies to (TRL's names), and the unscorable share."""
    out = {}
    for k, name in enumerate(names):
        column = table[:, k]
        applies = ~torch.isnan(column)
        out[f"rewards/{name}/mean"] = float(column[applies].mean()) if applies.any() else None
        out[f"rewards/{name}/std"] = float(nanstd(column)) if int(applies.sum()) > 1 else None
    out["rewards/unscorable_frac"] = float(unscorable.mean())
    return out


def mask_unscorable(batch, unscorable: torch.Tensor):
    """No reward applies to these rows (NaN rewards): they train on nothing (mask 0) and take their group's mean
    reward, so the others' baseline is the mean of the scorable rows. TRL gives them advantage 0 and also leaves them
    out of the group's std; here they stay in it at the mean, which lowers the std (rewards [1, 0, None]: GRPO
    advantages +-1.0 here, +-0.707 in TRL)."""
    rewards = batch.rewards.clone()
    for i in torch.nonzero(unscorable).flatten().tolist():
        peers = (batch.group == batch.group[i]) & ~unscorable
        rewards[i] = rewards[peers].mean() if peers.any() else 0.0
    return replace(batch, mask=batch.mask * (~unscorable).to(batch.mask.dtype)[:, None], rewards=rewards)
