"""Training: the one trainer every recipe runs (RL and preference alike), SFT warm start, run configuration, checkpoints
and the metrics log."""
from workbench.train.config import PRESETS, RunConfig, apply_sets, make_config
from workbench.train.trainer import Trainer
from workbench.train.run import make_trainer, train

__all__ = ["PRESETS", "RunConfig", "Trainer", "apply_sets", "make_config", "make_trainer", "train"]
