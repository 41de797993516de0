"""Record, or compare with a recording, the metrics of fixed-seed smoke runs of a dozen recipes (a table).

    python bench/behaviour.py record DIR      # each recipe's metrics.jsonl into DIR/<recipe>.jsonl
    python bench/behaviour.py compare DIR     # rerun and list every metric that differs from DIR

A refactor that must keep behaviour records before and compares after: identical runs print "same".
"""
from __future__ import annotations

import argparse
import json
import math
import tempfile
from pathlib import Path

import torch

# (recipe, task, extra overrides): one or two per family, RL and preference alike.
CASES = (("grpo", "countdown", {}), ("dapo", "countdown", {}), ("ppo", "countdown", {}),
         ("rloo", "countdown", {}), ("gspo", "countdown", {}), ("bapo", "countdown", {}),
         ("clip_cov", "countdown", {}), ("dpo", "countdown", {}), ("online-dpo", "countdown", {}),
         ("sppo", "countdown", {}), ("lipo", "countdown", {}), ("mcts-dpo", "countdown", {}),
         ("gigpo", "gridworld", {}))
STEPS = 4


def run_case(recipe: str, task: str, extra: dict) -> list[dict]:
    from workbench.train import make_config
    from workbench.train.run import train

    config = make_config("smoke", recipe=recipe, task=task, steps=STEPS, seed=0, threads=1, **extra)
    with tempfile.TemporaryDirectory() as out:
        train(config, out, progress=False, report=False)
        lines = (Path(out) / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def numbers(row: dict) -> dict:
    """The row's numbers but wall-clock times and speeds (time/*, tokens_per_s/*), which differ run to run."""
    clocked = ("time/", "tokens_per_s/")
    return {k: v for k, v in row.items() if isinstance(v, (int, float)) and not k.startswith(clocked)}


def differences(old: list[dict], new: list[dict]) -> list[str]:
    out = []
    if len(old) != len(new):
        out.append(f"{len(old)} rows -> {len(new)} rows")
    for i, (a, b) in enumerate(zip(old, new)):
        a, b = numbers(a), numbers(b)
        for k in sorted(set(a) | set(b)):
            if k not in b:
                out.append(f"row {i}: {k} gone")
            elif k not in a:
                out.append(f"row {i}: {k} new")
            elif not (a[k] == b[k] or (math.isnan(a[k]) and math.isnan(b[k]))):
                out.append(f"row {i}: {k} {a[k]!r} -> {b[k]!r}")
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=("record", "compare"))
    p.add_argument("folder", type=Path)
    p.add_argument("--only", nargs="*", help="recipes to run (default: all)")
    args = p.parse_args()
    torch.set_num_threads(1)
    args.folder.mkdir(parents=True, exist_ok=True)
    print(f"{'recipe':<12} {'task':<10} {'rows':>5} result")
    for recipe, task, extra in CASES:
        if args.only and recipe not in args.only:
            continue
        rows = run_case(recipe, task, extra)
        path = args.folder / f"{recipe}.jsonl"
        if args.mode == "record":
            path.write_text("".join(json.dumps(r) + "\n" for r in rows))
            print(f"{recipe:<12} {task:<10} {len(rows):>5} recorded", flush=True)
        else:
            old = [json.loads(line) for line in path.read_text().splitlines()]
            diff = differences(old, rows)
            print(f"{recipe:<12} {task:<10} {len(rows):>5} {'same' if not diff else f'{len(diff)} differences'}",
                  flush=True)
            for line in diff[:20]:
                print("    " + line)


if __name__ == "__main__":
    main()
