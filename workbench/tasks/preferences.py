"""Preference data without a hub: pairs and K-wise lists labelled by a task's verifier, or read from JSONL.

A pair is (prompt, chosen, rejected). From a procedural task, candidates are the verified target and
corrupted answers (one character changed), ranked by the verifier; shorter-correct beats longer-correct
where a task admits several correct answers (two wrong answers are never paired). From a model, candidates are its own samples (online).
"""
from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from workbench.files import read_jsonl
from workbench.preference.amortized import degrade_response
from workbench.tasks.base import Example, Task

DIGITS = "0123456789"


@dataclass(frozen=True)
class PreferencePair:
    prompt: str
    chosen: str
    rejected: str


def corrupt(answer: str, rng: random.Random) -> str:
    """A near-miss: one digit changed (or one character appended when there is no digit)."""
    positions = [i for i, ch in enumerate(answer) if ch in DIGITS]
    if not positions:
        return answer + rng.choice(DIGITS)
    i = rng.choice(positions)
    return answer[:i] + rng.choice([d for d in DIGITS if d != answer[i]]) + answer[i + 1:]


def rank(task: Task, example: Example, candidates: list[str]) -> list[str]:
    """Candidates best first: verifier score, then shorter, then text (a total, deterministic order)."""
    return sorted(set(candidates), key=lambda c: (-task.score(c, example), len(c), c))


def pair_from(task: Task, example: Example, candidates: list[str]) -> PreferencePair | None:
    """Best vs worst candidate: correct ≻ incorrect, or shorter-correct ≻ longer-correct; else None.

    Two wrong answers are never paired by length: that would teach "say less" whatever the answer.
    """
    ordered = rank(task, example, candidates)
    best, worst = ordered[0], ordered[-1]
    s_best, s_worst = task.score(best, example), task.score(worst, example)
    if len(ordered) < 2 or (s_best == s_worst and (s_best < 1.0 or len(best) == len(worst))):
        return None
    return PreferencePair(example.prompt, best, worst)


def task_pairs(task: Task, n: int, seed: int = 0) -> list[PreferencePair]:
    """n pairs verified-target ≻ corrupted-answer from training prompts (never the held-out set)."""
    rng = random.Random(f"pairs-{seed}")
    out = []
    for example in task.sample(n, rng):
        wrong = corrupt(example.target, rng)
        if task.score(wrong, example) > 0:  # the corruption happens to be correct (e.g. countdown)
            wrong = wrong + "+0"
        pair = pair_from(task, example, [example.target, wrong])
        if pair is not None:
            out.append(pair)
    return out


def task_lists(task: Task, n: int, k: int, seed: int = 0) -> list[tuple[str, list[str]]]:
    """n (prompt, K responses best first) lists: the target and K-1 distinct corruptions of it."""
    if k < 2:
        raise ValueError(f"a list needs K >= 2 responses, got {k}")
    rng = random.Random(f"lists-{seed}")
    out = []
    for example in task.sample(n, rng):
        candidates = {example.target}
        while len(candidates) < k:
            candidates.add(corrupt(rng.choice(sorted(candidates)), rng))
        out.append((example.prompt, rank(task, example, sorted(candidates))))
    return out


def degraded_lists(pairs: list[PreferencePair], fractions=(1 / 3, 2 / 3), seed: int = 0,
                   ) -> list[tuple[str, list[str]]]:
    """(prompt, [chosen, degraded copies of chosen, rejected]) for SPO's preference-degree loss.

    The copy for fraction f drops round(f · n) of the chosen answer's n digits (the key content of an arithmetic
    answer, where SPO extracts keywords with RAKE); removals are nested, so higher f is a worse answer.
    """
    gen = torch.Generator().manual_seed(seed)
    out = []
    for p in pairs:
        codes = torch.tensor([ord(ch) for ch in p.chosen])
        key = torch.tensor([ch in DIGITS for ch in p.chosen])
        copies = degrade_response(codes, key, fractions, generator=gen)
        out.append((p.prompt, [p.chosen, *["".join(map(chr, c.tolist())) for c in copies], p.rejected]))
    return out


def read_pairs(path: str | Path) -> list[PreferencePair]:
    """JSONL with one {"prompt", "chosen", "rejected"} object per line (TRL's explicit-prompt layout)."""
    pairs = []
    for number, row in enumerate(read_jsonl(path), 1):
        missing = {"prompt", "chosen", "rejected"} - set(row)
        if missing:
            raise ValueError(f"{path}: row {number}: missing fields {sorted(missing)}")
        if not row["chosen"] or not row["rejected"]:
            raise ValueError(f"{path}: row {number}: empty response")
        pairs.append(PreferencePair(row["prompt"], row["chosen"], row["rejected"]))
    if not pairs:
        raise ValueError(f"{path} holds no preference pairs")
    return pairs


def write_pairs(pairs: list[PreferencePair], path: str | Path) -> None:
    with open(path, "w") as f:
        f.writelines(json.dumps(asdict(p)) + "\n" for p in pairs)


def reward_pairs(prompts: list[str], candidates: list[list[str]], reward_fn) -> list[PreferencePair]:
    """Pairs from any reward function in TRL's convention `reward_fn(completions, prompts=...) -> list[float]`:
    for each prompt, its highest- vs lowest-scored candidate (ties in reward give no pair)."""
    if len(prompts) != len(candidates):
        raise ValueError(f"{len(prompts)} prompts but {len(candidates)} candidate lists")
    pairs = []
    for prompt, responses in zip(prompts, candidates):
        scores = reward_fn(responses, prompts=[prompt] * len(responses))
        if len(scores) != len(responses) or any(s != s for s in scores):
            raise ValueError(f"reward_fn returned {scores!r} for {len(responses)} completions of {prompt!r}")
        ranked = sorted(zip(scores, responses), key=lambda sr: -sr[0])
        if ranked[0][0] > ranked[-1][0]:
            pairs.append(PreferencePair(prompt, ranked[0][1], ranked[-1][1]))
    return pairs
