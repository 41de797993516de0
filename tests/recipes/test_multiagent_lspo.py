"""The LSPO recipe on werewolf: its parts (DPO on the latent-pairs source, the reference moving with the iteration),
the tasks it refuses, a short run that trains, expands its latent space at the iteration boundary and resumes
exactly after a checkpoint, and a one-intent run that pairs and trains nothing."""
import json

import pytest
import torch

import workbench.recipes.multiagent_lspo  # noqa: F401  (registration at import, until the recipes package lists it)
from tests.helpers import DigitFirst, resumes_exactly
from workbench.envs.poker import KuhnTask
from workbench.recipes import get_recipe
from workbench.tasks import get_task
from workbench.train.config import make_config
from workbench.train.glossary import unexplained
from workbench.train.metrics import read_rows
from workbench.train.pipeline import Pipeline
from workbench.train.trainer import Trainer

pytestmark = pytest.mark.covers("lspo")

# two iterations of two steps (the reference moves with them), a checkpoint between
RUN = dict(recipe="lspo", task="werewolf", steps=4, checkpoint_every=2, prompts_per_step=2, group_size=2,
           max_new_tokens=12, sft_steps=0, eval_size=4, minibatches=2, lr=1e-3)
SHORT = {"rollout": {"every": 2, "cfr_iterations": 20}, "reference": {"every": 2}}


def test_the_recipe_is_dpo_on_latent_pairs_with_the_reference_moving_each_iteration():
    recipe = get_recipe("lspo")
    assert recipe.objective.key == "preference" and recipe.objective.kw["loss"] == "lspo"
    assert recipe.objective.kw["beta"] == 0.1 and recipe.rollout.key == "lspo"
    assert recipe.reference.key == "iterate" and recipe.reference.kw["every"] == recipe.rollout.kw["every"]
    Pipeline(recipe).check_task(get_task("werewolf"))
    with pytest.raises(ValueError, match="task 'kuhn' has no latent game .* --task werewolf"):
        Pipeline(recipe).check_task(KuhnTask())
    with pytest.raises(ValueError, match="rollout:lspo needs several agents taking turns"):
        Pipeline(recipe).check_task(DigitFirst())


def test_a_short_run_trains_expands_its_space_and_resumes_exactly(tmp_path):
    config = make_config("smoke", recipe_overrides=SHORT, **RUN)
    assert resumes_exactly(config, tmp_path, stop_after_step=2)  # killed at the second iteration's start
    rows = read_rows(tmp_path / "straight" / "metrics.jsonl")
    assert len(rows) == 4 and not unexplained(set().union(*rows)), unexplained(set().union(*rows))
    assert [r["lspo/k"] for r in rows] == [2.0, 2.0, 3.0, 3.0]  # one more intent at the second iteration
    assert any(r["pairs"] > 0 and r["grad_norm"] > 0 for r in rows)
    assert all(r["grad_norm"] == 0 for r in rows if r["pairs"] == 0)  # a step without pairs trains nothing
    assert "accuracy_after" in json.loads((tmp_path / "straight" / "summary.json").read_text())


def test_one_intent_pairs_nothing_and_trains_nothing(tmp_path):
    """Card test (2) through the trainer: one cluster, no pairs, an empty batch every step, the weights unchanged."""
    one = {**SHORT, "rollout": {**SHORT["rollout"], "k": 1, "k_max": 1}}
    trainer = Trainer(make_config("smoke", recipe_overrides=one, **RUN), tmp_path / "run", progress=False).setup()
    before = [p.detach().clone() for p in trainer.model.parameters()]
    rows = [trainer.step(step) for step in range(2)]
    assert [(r["pairs"], r["lspo/k"], r["grad_norm"]) for r in rows] == [(0.0, 1.0, 0.0)] * 2
    assert all(torch.equal(a, b) for a, b in zip(before, trainer.model.parameters()))
