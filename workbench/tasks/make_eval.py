"""Held-out evaluation sets: how they are drawn, and the command that writes the shipped ones.

    python -m workbench.tasks.make_eval [--out DIR]

writes `<DIR>/<task.eval_file>` (default DIR: data/eval) for every built-in task at its default
parameters, one JSON `Example` per line, distinct prompts in draw order. Tasks built with other
parameters call `generated_eval_set`, which draws the same way in memory.
"""
from __future__ import annotations

import argparse
import random
from pathlib import Path

from workbench.tasks.base import Example, Task, save_jsonl

EVAL_SEED = 12345
EVAL_SIZE = 200
PROBE_DRAWS = 2000  # draws used to gauge how many distinct prompts a task has
HELD_OUT_SHARE = 5  # hold out at most 1/5 of the distinct prompts seen, so training has room


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
    return list(distinct.values())[:keep]


def generated_eval_set(task: Task, n: int | None = None) -> list[Example]:
    """`draw_eval_set(task)`, cached on the task because `sample` asks for it on every call."""
    rows = task.__dict__.get("_generated_eval")
    if rows is None:
        rows = task._generated_eval = draw_eval_set(task)
    return rows[:n] if n else list(rows)


def write_eval_files(out_dir: str | Path) -> list[Path]:
    """Write the held-out file of every built-in task (default parameters) into `out_dir`."""
    from workbench.tasks import TASKS

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for cls in TASKS.values():
        task = cls()
        path = out_dir / task.eval_file
        save_jsonl(draw_eval_set(task), path)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> None:
    from workbench.paths import DATA_DIR

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(DATA_DIR / "eval"), help="output folder")
    args = parser.parse_args(argv)
    for path in write_eval_files(args.out):
        print(path)


if __name__ == "__main__":
    main()
