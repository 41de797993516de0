"""Run settings that add or swap a recipe's components: `rollout_is` adds the `rollout-is` loss weight, `pairs` sizes
an offline preference data source and `data_path` swaps the task's pairs for a file's (`file-pairs`). The trainer
applies them (`workbench.train.trainer.resolve_recipe`) after the recipe's own overrides."""
from __future__ import annotations

import dataclasses

from workbench import registry
from workbench.recipes.base import Recipe, use


def with_rollout_correction(recipe: Recipe, mode: str, *, cap: float, low: float | None) -> Recipe:
    """`--set rollout_is=MODE` adds the `rollout-is` loss weight to any recipe, unless its objective already weights
    by the rollout engine's log-probs (it would correct twice)."""
    if mode == "none":
        return recipe
    objective = registry.get("objective", recipe.objective.key)
    if "mu_logp" in objective.reads_with(recipe.objective.kw):
        raise ValueError(f"rollout_is={mode!r} would correct twice: objective {recipe.objective.key!r} of recipe "
                         f"{recipe.key!r} already weights by the rollout log-probs; leave rollout_is='none'")
    return dataclasses.replace(recipe, loss_weights=recipe.loss_weights + (use("rollout-is", mode=mode, cap=cap,
                                                                                 low=low),))


def with_preference_data(recipe: Recipe, *, pairs: int, data_path: str) -> Recipe:
    """`pairs` sets the size of an offline preference dataset the recipe's rollout builds; `data_path` replaces its
    task pairs with the pairs of a JSONL file (`file-pairs`). A recipe whose rollout reads no pairs refuses a path."""
    rollout = recipe.rollout
    if data_path:
        if rollout.key != "task-pairs":
            raise ValueError(f"data_path={data_path!r} gives preference pairs, but recipe {recipe.key!r} samples with "
                             f"rollout {rollout.key!r}, which reads none; use a recipe trained on offline pairs (dpo, "
                             f"ipo, ...) or leave data_path empty")
        return dataclasses.replace(recipe, rollout=use("file-pairs", path=data_path))
    if "pairs" in registry.get("rollout", rollout.key).defaults:
        if "pairs" in rollout.kw:  # the run's setting would replace it without a word
            raise ValueError(f"recipe {recipe.key!r}: rollout {rollout.key!r}: pairs={rollout.kw['pairs']!r} through "
                             f"recipe_overrides is not used: the dataset's size is the run's setting, --set pairs=N")
        return dataclasses.replace(recipe, rollout=use(rollout.key, **{**rollout.kw, "pairs": pairs}))
    return recipe
