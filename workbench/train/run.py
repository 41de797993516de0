"""One entry point for every recipe: the trainer runs the pipeline of whatever components the recipe lists."""
from __future__ import annotations

from pathlib import Path

from workbench.train.config import RunConfig


def make_trainer(config: RunConfig, out: str | Path, progress: bool = True, callback=None):
    from workbench.train.trainer import Trainer

    return Trainer(config, out, progress=progress, callback=callback)


def train(config: RunConfig, out: str | Path, progress: bool = True, callback=None, report: bool = True,
          trainer=None) -> dict:
    """Run (or resume) `config` into `out`; writes report.html at the end when `report`."""
    trainer = trainer or make_trainer(config, out, progress=progress, callback=callback)
    summary = trainer.run()
    if report and getattr(getattr(trainer, "parallel", None), "is_main", True):
        from workbench.viz.report import write_report

        summary["report"] = str(write_report(out))
    return summary
