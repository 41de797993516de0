"""Held-out success of a run folder with sampling (temperature 1, K samples per held-out example), before RL (its
SFT warm start) and after (its last checkpoint): the "sampled" column of the README's multi-turn table.

    python bench/heldout_sampled.py RUN [K]      # K defaults to 4
"""
import json
import sys
from pathlib import Path

import torch

from workbench.rollout.engine import Sampling
from workbench.train.config import RunConfig
from workbench.train.trainer import Trainer


def sampled_success(run: Path, k: int, restore: bool) -> float:
    config = RunConfig.from_dict(json.loads((run / "config.json").read_text()))
    trainer = Trainer(config, run, progress=False).setup()
    if restore:
        trainer.restore()
    torch.manual_seed(1234)
    sampling = Sampling(config.max_new_tokens, 1.0, 1.0, tuple(config.stop) or None)
    batch = trainer.pipeline.rollout(trainer.engine, trainer.task, trainer.task.eval_set(config.eval_size),
                                     group_size=k, sampling=sampling)
    return float((batch.rewards >= 1).float().mean())


if __name__ == "__main__":
    run, k = Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 4
    print(json.dumps({"run": run.name, "k": k, "heldout_sampled_success": {
        "sft": sampled_success(run, k, restore=False), "rl": sampled_success(run, k, restore=True)}}))
