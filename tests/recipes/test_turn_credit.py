"""The turn-structure credit recipes (hgpo, ui-s1, igpo, infopo) train end to end on a multi-turn task: the rollout,
the policy-scored reward shaping (through the trainer's `ctx.score`) and the advantage fit the pipeline's stages."""
import math

import pytest
import torch

from tests.helpers import TINY, DigitSteps
from workbench.train import Trainer, make_config


@pytest.mark.covers("hgpo", "ui-s1", "igpo", "infopo")
def test_the_turn_credit_recipes_fill_what_their_advantages_read_on_a_multi_turn_task(tmp_path):
    for name in ("hgpo", "ui-s1", "igpo", "infopo"):
        trainer = Trainer(make_config("smoke", recipe=name, **{**TINY, "task": "gridworld", "steps": 1}),
                          tmp_path / name, progress=False)
        trainer.task = DigitSteps()
        trainer.setup()
        batch = trainer.make_batch(0)
        assert torch.isfinite(batch.advantages).all(), name
        if name != "ui-s1":  # an untrained policy rarely matches the expert: every ui-s1 reward may be 0
            assert batch.advantages.abs().sum() > 0, name
        assert torch.all(batch.advantages[batch.mask == 0] == 0), name
        if name == "ui-s1":
            assert all("expert_match" in info for row in batch.turn_info for info in row)
        if name == "igpo":
            assert all("belief" in info for row in batch.turn_info for info in row)
        row = trainer.step(0)
        assert math.isfinite(row["loss/total"]) and (row["grad_norm"] > 0 or name == "ui-s1"), name
        if name in ("igpo", "infopo"):
            assert any(key.startswith(f"{name}/") for key in row), name
