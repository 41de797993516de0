"""The command that writes the shipped held-out evaluation sets:

    python -m workbench.tasks.make_eval [--out DIR]

writes `<DIR>/<task.eval_file>` (default DIR: data/eval) for every registered task at its default
parameters that has one (a game has none: it is evaluated by playing it), one JSON `Example` per line, distinct prompts in draw order (`tasks.base.draw_eval_set`). Tasks built
with other parameters call `tasks.base.generated_eval_set`, which draws the same way in memory.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from workbench import registry
from workbench.paths import DATA_DIR
from workbench.tasks.base import draw_eval_set, save_jsonl


def write_eval_files(out_dir: str | Path) -> list[Path]:
    """Write the held-out file of every registered task (default parameters) into `out_dir`."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for entry in registry.entries("env"):
        task = entry.fn()
        if task.eval_file is None:  # a game: evaluated by playing it, not on held-out prompts
            continue
        path = out_dir / task.eval_file
        save_jsonl(draw_eval_set(task), path)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(DATA_DIR / "eval"), help="output folder")
    args = parser.parse_args(argv)
    for path in write_eval_files(args.out):
        print(path)


if __name__ == "__main__":
    main()
