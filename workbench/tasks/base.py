"""The task protocol: procedural prompts with exact verifiers."""
from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path

from workbench.files import read_jsonl


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
        from workbench.envs.base import TaskEnv  # lazy: workbench.envs imports this module

        return TaskEnv(self)

    def expert_actions(self, example: Example) -> list[str]:
        """The action texts of a solving episode, replayable through `make_env()`: here the one answer."""
        return [example.target]

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
        parameters, the same seeded draw made in memory (`make_eval.generated_eval_set`)."""
        if not self.eval_file:
            from workbench.tasks.make_eval import generated_eval_set  # lazy: make_eval imports this module

            return generated_eval_set(self, n)
        from workbench.paths import data_file

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


def load_jsonl(path: str | Path) -> list[Example]:
    return [Example(**row) for row in read_jsonl(path)]


def save_jsonl(examples: list[Example], path: str | Path) -> None:
    with open(path, "w") as f:
        for e in examples:
            f.write(json.dumps(asdict(e)) + "\n")
