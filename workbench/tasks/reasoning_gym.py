"""Adapter for the procedural datasets of the `reasoning-gym` package (optional dependency).

Format: prompt = the dataset's question (trailing whitespace stripped) + ANSWER_CUE; answer and
target = the dataset's answer string. Scoring defers to the dataset's own `score_answer`, which
may give partial credit. Unlike the built-ins, prompts can be long and contain newlines.
"""
from __future__ import annotations

import random
from typing import Any

from workbench.envs.base import check_knob_rules, check_knobs, knob_kinds
from workbench.params import did_you_mean
from workbench.tasks.base import Example, Task

ANSWER_CUE = "\nAnswer: "
MAX_HELD_OUT = 50
MAX_SIZE = 100_000  # every entry is generated when the task is built

INSTALL_HINT = "pip install reasoning-gym  (or, from a checkout: pip install -e '.[tasks]')"


def import_reasoning_gym():
    """The `reasoning_gym` module, or an ImportError that says how to install it."""
    try:
        import reasoning_gym
    except ImportError as err:
        raise ImportError(f"reasoning-gym tasks need the reasoning-gym package: {INSTALL_HINT}") from err
    return reasoning_gym


class ReasoningGymTask(Task):
    """One reasoning-gym dataset of `size` entries drawn with `seed`; `config` goes to its config.

    The last `min(50, size // 5)` entries are the held-out evaluation set; `make_example` draws
    uniformly from the others. Every entry is generated up front so `score` can find the entry
    behind any prompt this task produced, even in an `Example` reloaded from disk.
    """

    def __init__(self, dataset: str, size: int = 500, seed: int = 0, **config: Any):
        rg = import_reasoning_gym()
        if dataset not in rg.factory.DATASETS:
            names = ", ".join(sorted(rg.factory.DATASETS))
            hint = did_you_mean(dataset, rg.factory.DATASETS, n=2)
            raise ValueError(f"unknown reasoning-gym dataset {dataset!r}{hint}; available: {names}")
        name = f"reasoning_gym:{dataset}"
        config_knobs = {k: knob for k, knob in knob_kinds(rg.factory.DATASETS[dataset][1]).items()
                        if k not in ("size", "seed")}  # the dataset config's fields; size and seed are ours
        check_knobs(name, {"size": size, "seed": seed, **config}, ReasoningGymTask, extra=config_knobs)
        check_knob_rules(name, [(not 2 <= size <= MAX_SIZE,
                                 f"2 <= size <= {MAX_SIZE} (every entry is generated up front), got size={size}")])
        self.dataset_name = dataset
        self.name = name
        self.size, self.seed, self.config = size, seed, dict(config)
        try:
            self.dataset = rg.create_dataset(dataset, size=size, seed=seed, **config)
        except AssertionError as err:  # reasoning-gym validates its configs with assert
            raise ValueError(f"{name}: its config refuses {config}: {err or 'a failed check'}; its knobs: "
                             f"{', '.join(config_knobs)}") from err
        self.entries = [self.dataset[i] for i in range(size)]
        self.n_held_out = min(MAX_HELD_OUT, size // 5)
        self.by_prompt: dict[str, dict] = {}
        for entry in self.entries:
            self.by_prompt.setdefault(to_prompt(entry), entry)

    def make_example(self, rng: random.Random) -> Example:
        return to_example(self.entries[rng.randrange(self.size - self.n_held_out)])

    def score(self, completion: str, example: Example) -> float:
        entry = self.by_prompt.get(example.prompt)
        if entry is None:  # not one of ours: the best we can do is an exact match
            return 1.0 if completion.strip() == example.answer.strip() else 0.0
        try:
            return float(self.dataset.score_answer(answer=completion.strip(), entry=entry))
        except Exception:  # a verifier must never crash training on junk model output
            return 0.0

    def eval_set(self, n: int | None = None) -> list[Example]:
        rows = [to_example(e) for e in self.entries[self.size - self.n_held_out:]]
        return rows[:n] if n else rows

    def __repr__(self) -> str:
        extra = "".join(f", {k}={v!r}" for k, v in self.config.items())
        return f"ReasoningGymTask({self.dataset_name!r}, size={self.size}, seed={self.seed}{extra})"


def to_prompt(entry: dict) -> str:
    return entry["question"].rstrip() + ANSWER_CUE


def to_example(entry: dict) -> Example:
    answer = str(entry["answer"])
    return Example(prompt=to_prompt(entry), answer=answer, target=answer)
