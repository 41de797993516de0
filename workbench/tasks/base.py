"""The task protocol: procedural prompts with exact verifiers, and how a task's held-out evaluation set is drawn."""
from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, TypeVar

from workbench.envs.base import TaskEnv
from workbench.files import read_jsonl
from workbench.paths import data_file

EVAL_SEED = 12345
EVAL_SIZE = 200
PROBE_DRAWS = 2000  # draws used to gauge how many distinct prompts a task has
HELD_OUT_SHARE = 5  # hold out at most 1/5 of the distinct prompts seen, so training has room
PROBE_SEED = 0  # seeds the draws a constructor makes to check its knobs are feasible (same verdict every time)

T = TypeVar("T")


@dataclass(frozen=True)
class Example:
    prompt: str   # text fed to the model, e.g. "12+34="
    answer: str   # what the verifier checks against, e.g. "46"
    target: str   # one correct completion (no EOS) used for SFT, e.g. "46"


class Task:
    """A family of prompts with an exact verifier, run as an environment.

    Subclasses implement `make_example(rng)` and `score(completion, example)`; `sample` draws
    training examples that never collide with the fixed held-out evaluation set. `make_env()` gives the
    environment an episode runs in: by default the one-turn `TaskEnv` (prompt -> one scored answer);
    multi-turn tasks (workbench.envs) return their own, and `expert_actions` gives the actions of one
    solving episode (the SFT warm-start replays them through the environment).
    """

    name: str = ""
    eval_file: str | None = None  # file under data/eval/ holding the fixed held-out set

    def make_example(self, rng: random.Random) -> Example:
        raise NotImplementedError

    def score(self, completion: str, example: Example) -> float:
        """Exact verifier: 1.0 if `completion` solves `example`, else 0.0."""
        raise NotImplementedError

    def make_env(self):
        """A fresh environment for one episode (see workbench.envs.base.Env)."""
        return TaskEnv(self)

    def expert_actions(self, example: Example) -> list[str]:
        """The action texts of a solving episode, replayable through `make_env()`: here the one answer."""
        return [example.target]

    def opening(self, example: Example):
        """The prompt an episode of `example` opens with, as the engine is given it (a string: one user message; a
        list of chat messages when a system prompt comes first, `workbench.tasks.instruct`)."""
        return example.prompt

    def known_examples(self) -> list[Example]:
        """Every example known before training, for checks that must pass before it starts (prompt lengths):
        the held-out set; a data-file task adds its training rows."""
        return self.eval_set()

    def data_digest(self) -> str | None:
        """A hash of the data files the task reads (None: the task is generated in code from its parameters)."""
        return None

    def rewards(self, completions: list[str], examples: list[Example]) -> list[float]:
        if len(completions) != len(examples):
            raise ValueError(f"{len(completions)} completions for {len(examples)} examples")
        return [float(self.score(c, e)) for c, e in zip(completions, examples)]

    def eval_set(self, n: int | None = None) -> list[Example]:
        """The shipped held-out file (`eval_file`, drawn at the task's default parameters), or, for other
        parameters, the same seeded draw made in memory (`generated_eval_set`)."""
        if not self.eval_file:
            return generated_eval_set(self, n)
        rows = load_jsonl(data_file("eval", self.eval_file))
        return rows[:n] if n else rows

    def held_out_prompts(self) -> set[str]:
        """The prompts training never samples (read once per task object: sample runs every step)."""
        if not hasattr(self, "_held_out"):
            self._held_out = {e.prompt for e in self.eval_set()}
        return self._held_out

    def sample(self, n: int, rng: random.Random) -> list[Example]:
        held_out = self.held_out_prompts()
        out: list[Example] = []
        for _ in range(1000 * n):
            if len(out) == n:
                return out
            ex = self.make_example(rng)
            if ex.prompt not in held_out:
                out.append(ex)
        raise RuntimeError(f"task {self.name!r}: could not draw {n} examples outside the held-out set")


class WrappedTask(Task):
    """A task that changes how another is asked or read (`workbench.tasks.instruct`, `workbench.tasks.guidance`):
    examples, the held-out set, knobs and helpers are the wrapped task's; a subclass overrides what it changes."""

    def __init__(self, task: Task):
        self.task, self.name, self.eval_file = task, task.name, task.eval_file

    def __getattr__(self, name):  # the wrapped task's knobs and helpers (reasoning-gym's entries, a file's path, ...)
        if name == "task":
            raise AttributeError(name)
        return getattr(self.task, name)

    def make_example(self, rng):
        return self.task.make_example(rng)

    def sample(self, n, rng):
        return self.task.sample(n, rng)

    def eval_set(self, n=None):
        return self.task.eval_set(n)

    def known_examples(self):
        return self.task.known_examples()

    def data_digest(self):
        return self.task.data_digest()

    def score(self, completion: str, example: Example) -> float:
        return self.task.score(completion, example)

    def make_env(self):
        return self.task.make_env()

    def expert_actions(self, example: Example) -> list[str]:
        return self.task.expert_actions(example)

    def opening(self, example: Example):
        return self.task.opening(example)


def draw_eval_set(task: Task, n: int = EVAL_SIZE, seed: int = EVAL_SEED) -> list[Example]:
    """The first `n` distinct prompts of a seeded draw, capped for small prompt spaces.

    A task with few distinct prompts (e.g. 1-digit addition has 100) would otherwise have all of
    them held out and `sample` could never draw a training example.
    """
    rng = random.Random(seed)
    distinct: dict[str, Example] = {}
    for _ in range(PROBE_DRAWS):
        example = task.make_example(rng)
        distinct.setdefault(example.prompt, example)
    keep = min(n, len(distinct) // HELD_OUT_SHARE)
    if keep == 0:
        raise ValueError(f"{task.name}: {task!r} makes only {len(distinct)} distinct prompts (in {PROBE_DRAWS} draws), "
                         f"too few to hold one in {HELD_OUT_SHARE} out for evaluation; widen its knobs so it makes at "
                         f"least {HELD_OUT_SHARE}")
    return list(distinct.values())[:keep]


def redraw(draw: Callable[[], T | None], tries: int, failure: str) -> T:
    """The first result of `draw()` that is not None, within `tries` calls: every generator that draws until it
    succeeds draws through this, so no knob can make it loop forever. The constructors refuse knobs whose draws
    rarely succeed (checked on a seeded probe), so running out is an internal error, a RuntimeError(failure)."""
    for _ in range(tries):
        result = draw()
        if result is not None:
            return result
    raise RuntimeError(failure)


def generated_eval_set(task: Task, n: int | None = None) -> list[Example]:
    """`draw_eval_set(task)`, cached on the task because `sample` asks for it on every call."""
    rows = task.__dict__.get("_generated_eval")
    if rows is None:
        rows = task._generated_eval = draw_eval_set(task)
    return rows[:n] if n else list(rows)


def load_jsonl(path: str | Path) -> list[Example]:
    return [Example(**row) for row in read_jsonl(path)]


def save_jsonl(examples: list[Example], path: str | Path) -> None:
    with open(path, "w") as f:
        for e in examples:
            f.write(json.dumps(asdict(e)) + "\n")
