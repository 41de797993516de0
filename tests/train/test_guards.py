"""The guards around every update: no gradient anywhere, or a non-finite loss, never passes silently."""
import math

import pytest
import torch

from tests.helpers import PREF, TINY, DigitFirst, metric_rows
from workbench.train import Trainer, make_config, make_trainer
from workbench.train.guards import NoGradientError, NonFiniteError, NonFiniteGuard
from workbench.train.pipeline import Pipeline


def trainer_for(recipe, tmp_path, **overrides):
    trainer = Trainer(make_config("smoke", recipe=recipe, **{**TINY, **overrides}), tmp_path, progress=False)
    trainer.task = DigitFirst()
    return trainer


def test_a_run_that_trains_nothing_stops_and_names_the_cause(tmp_path):
    trainer = trainer_for("grpo", tmp_path, steps=6).setup()
    trainer.params = [torch.nn.Parameter(torch.zeros(1))]  # nothing the loss reaches
    trainer.groups = [trainer.params]  # what is clipped (and so what grad_norm measures)
    with pytest.raises(NoGradientError, match="4-bit"):
        trainer.run()


@pytest.mark.covers("capo")
def test_capo_masking_every_token_is_named_as_a_cause(tmp_path):
    """CAPO with thresholds no token meets silences the whole loss: the guard's message points at it."""
    overrides = {"objective": {"tau_fisher": 1e-30, "tau_hessian": 1e-30}}
    trainer = trainer_for("capo", tmp_path, steps=8, prompts_per_step=8, recipe_overrides=overrides)
    with pytest.raises(NoGradientError, match="capo/masked_frac"):
        trainer.run()  # only tokens with A = 0 (no gradient anyway) pass thresholds of 1e-30


def test_the_guard_stops_or_counts(tmp_path):
    assert NonFiniteGuard("stop").allows(0, 1.0, 2.0)
    with pytest.raises(NonFiniteError, match=r"step 3: the loss is nan .*nonfinite=skip"):
        NonFiniteGuard("stop").allows(3, math.nan, 1.0)
    skip = NonFiniteGuard("skip")
    assert not skip.allows(0, 1.0, math.inf) and not skip.allows(0, -math.inf, 1.0) and skip.allows(0, 1.0, 1.0)
    assert skip.take() == 2 and skip.take() == 0


def nan_loss_at(monkeypatch, step_to_poison):
    real = Pipeline.loss

    def poisoned(self, fwd, mb, denom, value_denom, step, total, *weights):
        loss, metrics = real(self, fwd, mb, denom, value_denom, step, total, *weights)
        return (loss * math.nan if step == step_to_poison else loss), metrics

    monkeypatch.setattr(Pipeline, "loss", poisoned)


def test_a_nan_loss_stops_the_run_before_the_update_and_the_folder_resumes(tmp_path, monkeypatch):
    nan_loss_at(monkeypatch, 3)
    trainer = trainer_for("grpo", tmp_path)
    with pytest.raises(NonFiniteError, match="step 3: the loss is nan"):
        trainer.run()
    assert [r["step"] for r in metric_rows(tmp_path)] == [0, 1, 2]  # no null row was logged
    assert all(v is not None for r in metric_rows(tmp_path) for k, v in r.items() if k not in ("kl", "clip/region"))
    monkeypatch.undo()
    straight = trainer_for("grpo", tmp_path / "straight")
    straight.run()
    resumed = trainer_for("grpo", tmp_path)
    resumed.run()  # the same command after the fault: resumes from step 2's checkpoint
    assert metric_rows(tmp_path) == metric_rows(tmp_path / "straight")


def test_skip_mode_drops_non_finite_updates_counts_them_and_leaves_the_weights(tmp_path, monkeypatch):
    nan_loss_at(monkeypatch, 1)
    trainer = trainer_for("grpo", tmp_path, nonfinite="skip", steps=2, checkpoint_every=1).setup()
    trainer.run()
    rows = metric_rows(tmp_path)
    assert [r["nonfinite/skipped"] for r in rows] == [0, 2]  # both minibatches of step 1
    after_step_0 = torch.load(tmp_path / "checkpoints" / "step_000001" / "state.pt", weights_only=False)["model"]
    final = torch.load(tmp_path / "checkpoints" / "step_000002" / "state.pt", weights_only=False)["model"]
    assert all(torch.equal(after_step_0[k], final[k]) for k in final)
    assert all(torch.isfinite(v).all() for v in final.values())


def test_preference_runs_stop_on_a_non_finite_loss(tmp_path, monkeypatch):
    trainer = make_trainer(make_config("smoke", recipe="dpo", **{**PREF, "sft_steps": 0, "steps": 2}), tmp_path,
                           progress=False)
    real = trainer.pipeline.loss  # the preference objective's loss, in the loop every recipe runs
    monkeypatch.setattr(trainer.pipeline, "loss", lambda *a: (lambda out: (out[0] * math.inf, out[1]))(real(*a)))
    with pytest.raises(NonFiniteError, match="step 0"):
        trainer.run()
