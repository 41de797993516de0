"""Run several recipes on the same task, model and seeds, and summarise them side by side."""
from __future__ import annotations

import json
import statistics
from pathlib import Path

from workbench.files import write_atomic
from workbench.train.config import apply_sets, make_config
from workbench.train.metrics import read_rows
from workbench.train.run import make_trainer, train


def smoothed(values: list[float], window: int) -> list[float]:
    """Trailing moving average (the first points average what exists so far)."""
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def steps_to_target(rows: list[dict], target: float, key: str = "accuracy", window: int = 10) -> int | None:
    """First step whose trailing `window`-step mean of `key` reaches `target` (None if never)."""
    points = [(r["step"], r[key]) for r in rows if r.get(key) is not None]
    for (step, _), value in zip(points, smoothed([v for _, v in points], window)):
        if value >= target:
            return step
    return None


def mean_std(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def summarize(runs: dict[str, list[dict]], target: float, key: str = "accuracy", window: int = 10) -> dict:
    """Per recipe: accuracy before/after (mean, std over seeds), steps to `target` for each seed, and pass@k after
    training (mean, std) when the runs report it (--set pass_k=K)."""
    out = {}
    for recipe, seeds in runs.items():
        before, std_b = mean_std([s["summary"]["accuracy_before"] for s in seeds])
        after, std_a = mean_std([s["summary"]["accuracy_after"] for s in seeds])
        reached = [steps_to_target(s["rows"], target, key, window) for s in seeds]
        out[recipe] = {"seeds": len(seeds), "accuracy_before": before, "accuracy_before_std": std_b,
                       "accuracy_after": after, "accuracy_after_std": std_a, "steps_to_target": reached}
        if all("pass@k_after" in s["summary"] for s in seeds):  # runs with --set pass_k=K
            ks = {s["summary"]["pass_k"] for s in seeds}
            if len(ks) > 1:
                raise ValueError(f"recipe {recipe!r}: its seeds report pass@k for different k {sorted(ks)}")
            pass_k, std_k = mean_std([s["summary"]["pass@k_after"] for s in seeds])
            out[recipe].update({"pass_k": ks.pop(), "pass@k_after": pass_k, "pass@k_after_std": std_k})
    return out


def plan(recipes: list[str], *, task: str, preset: str, seeds: int, out: Path, sets, progress: bool,
         recipe_sets: dict[str, list[str]] | None = None) -> dict:
    """{(recipe, run folder): its trainer} for every (recipe, seed), all built before any trains, so a bad recipe,
    override or task anywhere in the list is refused before the first run starts. `recipe_sets[recipe]` are --set
    assignments for that recipe's runs only, applied after the shared `sets`."""
    if not recipes:
        raise ValueError("compare needs at least one recipe")
    repeated = sorted({r for r in recipes if recipes.count(r) > 1})
    if repeated:
        raise ValueError(f"recipes {repeated} are listed more than once; list each once (--seeds sets the runs per "
                         "recipe)")
    if seeds < 1:
        raise ValueError(f"seeds must be >= 1, got {seeds}")
    recipe_sets = dict(recipe_sets or {})
    strays = sorted(set(recipe_sets) - set(recipes))
    if strays:  # a typo would otherwise apply to nothing, silently
        raise ValueError(f"recipe_sets names {strays}, which are not among the compared recipes {list(recipes)}")
    for recipe, assignments in recipe_sets.items():
        if isinstance(assignments, str):  # "lr=1e-5" would be read as the assignments "l", "r", ...
            raise ValueError(f"recipe_sets[{recipe!r}] must be a list of key=value strings, got {assignments!r}")
    return {(recipe, out / f"{recipe}-s{seed}"): make_trainer(
                apply_sets(make_config(preset, recipe=recipe, task=task, seed=seed),
                           [*sets, *recipe_sets.get(recipe, ())]),
                out / f"{recipe}-s{seed}", progress=progress)
            for recipe in recipes for seed in range(seeds)}


def compare(recipes: list[str], *, task: str, preset: str = "smoke", seeds: int = 2, out: str | Path,
            sets: list[str] = (), target: float | None = None, progress: bool = True,
            recipe_sets: dict[str, list[str]] | None = None) -> dict:
    """Train every (recipe, seed) into out/RECIPE-sSEED (each resumable) and write out/compare.html.

    sets: --set assignments for every run; recipe_sets: {recipe: assignments} for that recipe's runs only,
    applied after `sets` (e.g. {"online-dpo": ["group_size=16"]}).

    target: sampled-accuracy level for "steps to target" (trailing 10-step mean); default: the mean
    accuracy of the first 10 steps over all runs plus 0.05.
    """
    out = Path(out)
    planned = plan(recipes, task=task, preset=preset, seeds=seeds, out=out, sets=sets, progress=progress,
                   recipe_sets=recipe_sets)
    runs: dict[str, list[dict]] = {}
    for (recipe, folder), trainer in planned.items():
        summary = train(trainer.config, folder, report=False, trainer=trainer)
        runs.setdefault(recipe, []).append({"summary": summary, "rows": read_rows(folder / "metrics.jsonl")})
    if target is None:  # preference runs log no sampled accuracy: then no steps-to-target column
        starts = [r["accuracy"] for seeds_ in runs.values() for s in seeds_ for r in s["rows"][:10]
                  if r.get("accuracy") is not None]
        target = round(statistics.fmean(starts) + 0.05, 3) if starts else float("nan")
    table = summarize(runs, target)
    result = {"task": task, "preset": preset, "target_accuracy": target, "recipes": table}
    write_atomic(out / "compare.json", json.dumps(result, indent=2))
    from workbench.viz.report import write_seed_comparison

    result["report"] = str(write_seed_comparison({k: [s["rows"] for s in v] for k, v in runs.items()}, result,
                                                 out / "compare.html"))
    return result
