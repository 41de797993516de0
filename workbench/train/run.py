"""One entry point for every recipe: RL recipes run the RL loop, preference recipes the preference loop."""
from __future__ import annotations

from pathlib import Path

from workbench.recipes import PreferenceRecipe, get_recipe
from workbench.train.config import RunConfig


def make_trainer(config: RunConfig, out: str | Path, progress: bool = True, callback=None):
    from workbench.train.preference import PreferenceTrainer
    from workbench.train.rl import Trainer

    cls = PreferenceTrainer if isinstance(get_recipe(config.recipe), PreferenceRecipe) else Trainer
    return cls(config, out, progress=progress, callback=callback)


def train(config: RunConfig, out: str | Path, progress: bool = True, callback=None, report: bool = True,
          trainer=None) -> dict:
    """Run (or resume) `config` into `out`; writes report.html at the end when `report`."""
    trainer = trainer or make_trainer(config, out, progress=progress, callback=callback)
    summary = trainer.run()
    if report and getattr(getattr(trainer, "parallel", None), "is_main", True):
        from workbench.viz.report import write_report

        summary["report"] = str(write_report(out))
    return summary
