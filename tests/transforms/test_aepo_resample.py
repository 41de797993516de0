"""AEPO-arbitrary's re-sampling transform: which prompts are re-drawn, which samples replace which rows."""
import copy

import pytest
import torch

from tests.helpers import TINY, DigitFirst, metric_rows, resumes_exactly, seeded
from workbench import registry
from workbench.advantages.aepo import aepo_override
from workbench.advantages.group import grpo
from workbench.batch import RolloutBatch
from workbench.context import StepContext
from workbench.train.config import make_config
from workbench.train.trainer import Trainer
from workbench.transforms.aepo_resample import REFERENCE_N, aepo_resample, replaced_count

pytestmark = pytest.mark.covers("aepo-arbitrary")
G = 4


def rollout_batch(rewards, tag, G=G, T=5, seed=0, scores=True):
    """What a rollout returns for len(rewards) / G prompts (completions named tag + row), plus `scores` as
    Pipeline.reward leaves them when `scores`."""
    g, n = seeded(seed), len(rewards)
    lengths = torch.randint(1, T + 1, (n,), generator=g)
    mask = (torch.arange(T)[None, :] < lengths[:, None]).float()
    rewards = torch.as_tensor(rewards, dtype=torch.float32)
    return RolloutBatch(
        response_ids=torch.randint(3, 20, (n, T), generator=g) * mask.long(), mask=mask,
        group=torch.arange(n // G).repeat_interleave(G), rewards=rewards, scores=rewards.clone() if scores else None,
        prompt_ids=torch.randint(3, 20, (n, 2), generator=g), prompt_mask=torch.ones(n, 2),
        mu_logp=-torch.rand(n, T, generator=g) * mask, truncated=torch.zeros(n, dtype=torch.bool),
        completions=[f"{tag}{i}" for i in range(n)], prompts=[f"q{i // G}" for i in range(n)])


class Rollout:
    """ctx.rollout stand-in: records its calls and returns a copy of a prepared re-sampled batch."""

    def __init__(self, batch):
        self.batch, self.calls = batch, []

    def __call__(self, examples, *, group_size, greedy=False, temperature=None):
        self.calls.append((list(examples), group_size, temperature))
        return copy.deepcopy(self.batch)


def context(resampled, n_prompts=4):
    rollout = Rollout(resampled)
    ctx = StepContext(step=0, total_steps=1, seed=0, group_size=G, prompts_per_step=n_prompts, max_new_tokens=5,
                      examples=[f"q{i}" for i in range(n_prompts)], rollout=rollout)
    return ctx, rollout


MAIN = [1, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0]
RESAMPLED = [1, 0, 0, 0, 1, 1, 0, 0]  # GRPO advantage > 0.05: rows 0 (1.5), 4 and 5 (0.866)


def main_batch():
    return rollout_batch(MAIN, "b", seed=1)


def test_registered_with_the_reference_settings():
    entry = registry.get("group_transform", "aepo-arbitrary")
    assert entry.defaults == {"temperature": 1.0, "entropy_gap": 0.0, "resample_frac": 0.25,
                              "replace_frac": 60 / 2560, "threshold": 0.05}
    assert REFERENCE_N == 3 / 128 and entry.provides == ("resampled",) and entry.equation and entry.fn.__doc__
    assert entry.title == registry.catalog()["aepo-arbitrary"]["title"]


def test_correct_resamples_replace_the_first_rows_in_order():
    ctx, rollout = context(rollout_batch(RESAMPLED, "r", G=G, seed=2))
    batch = main_batch()
    out = aepo_resample(main_batch(), ctx, temperature=1.2, entropy_gap=0.1, resample_frac=0.5, replace_frac=0.25)
    assert rollout.calls == [(["q0", "q1"], G, 1.2)]  # the first half of the prompts, G each, at T
    assert out.completions == ["r0", "r4", "r5"] + batch.completions[3:]
    assert out.resampled.tolist() == [True] * 3 + [False] * 13
    assert out.group.tolist() == [4, 5, 5] + batch.group[3:].tolist()  # own groups, past the batch's ids
    assert torch.equal(out.rewards[3:], batch.rewards[3:]) and out.rewards[:3].tolist() == [1.0, 1.0, 1.0]
    assert out.scores.tolist() == out.rewards.tolist() and out.size == batch.size
    assert ctx.metrics == {"aepo/candidates": 3.0, "aepo/replaced": 3.0}


def test_replaced_samples_carry_advantage_exactly_one():
    """Catalog (2), through the recipe's chain: grpo (groups of one allowed), then the override."""
    ctx, _ = context(rollout_batch(RESAMPLED, "r", seed=2))
    out = aepo_resample(main_batch(), ctx, temperature=1.2, resample_frac=0.5, replace_frac=0.25)
    out.advantages = grpo(out, allow_singletons=True)
    A = aepo_override(out)
    assert torch.equal(A[:3], out.mask[:3].to(A.dtype))
    # kept rows: GRPO over the rows left in their group (group 0 lost three rows: a group of one, A = 0)
    kept = out.select(torch.arange(3, 16))
    assert torch.equal(A[3:], grpo(kept, allow_singletons=True)) and torch.all(A[3] == 0)


def test_above_the_target_half_as_many_rows_are_replaced():
    for gap, n in ((0.2, 3), (0.0, 3), (-1e-9, 1), (-0.5, 1)):
        ctx, _ = context(rollout_batch(RESAMPLED, "r", seed=2))
        out = aepo_resample(main_batch(), ctx, entropy_gap=gap, resample_frac=0.5, replace_frac=0.25)
        assert int(out.resampled.sum()) == n == ctx.metrics["aepo/replaced"]
    assert [replaced_count(60, k, 0.1) for k in (0, 1, 59, 60, 200)] == [0, 1, 59, 60, 60]
    assert [replaced_count(60, k, -0.1) for k in (0, 1, 59, 60, 200)] == [0, 0, 29, 30, 30]


@pytest.mark.parametrize("replace_frac, n", [(REFERENCE_N, 1), (1 / 16, 1), (0.07, 2), (0.125, 2), (1.0, 3)])
def test_at_most_ceil_of_the_fraction_of_the_batch(replace_frac, n):
    ctx, _ = context(rollout_batch(RESAMPLED, "r", seed=2))
    out = aepo_resample(main_batch(), ctx, resample_frac=0.5, replace_frac=replace_frac)
    assert int(out.resampled.sum()) == n


@pytest.mark.parametrize("kw", [dict(replace_frac=0.0), dict(resample_frac=0.0), dict(resample_frac=0.2)])
def test_alpha_zero_or_no_resampled_prompt_is_grpo(kw):
    """Catalog (3): nothing re-sampled (no rollout at all) or nothing replaced leaves GRPO's batch and advantages."""
    ctx, rollout = context(rollout_batch(RESAMPLED, "r", seed=2))
    batch = main_batch()
    out = aepo_resample(main_batch(), ctx, **{"resample_frac": 0.5, "replace_frac": 0.25, **kw})
    assert rollout.calls == [] and not out.resampled.any() and out.completions == batch.completions
    out.advantages = grpo(out)
    assert torch.equal(aepo_override(out), grpo(batch))
    assert ctx.metrics == {"aepo/candidates": 0.0, "aepo/replaced": 0.0}


def test_no_correct_resample_replaces_nothing():
    """The reference crashes here (`None.batch`); the batch stays as it is."""
    for rewards in ([0.0] * 8, [1.0] * 8):  # all wrong, or all right (A = 0 everywhere)
        ctx, rollout = context(rollout_batch(rewards, "r", seed=2))
        out = aepo_resample(main_batch(), ctx, resample_frac=0.5, replace_frac=0.25)
        assert len(rollout.calls) == 1 and not out.resampled.any() and ctx.metrics["aepo/candidates"] == 0


def test_rows_of_other_widths_are_padded_and_the_prompt_left_padded():
    resampled = rollout_batch(RESAMPLED, "r", T=8, seed=3)
    resampled.prompt_ids, resampled.prompt_mask = torch.randint(3, 20, (8, 3)), torch.ones(8, 3)
    ctx, _ = context(resampled)
    ctx.pad_id = 1
    out = aepo_resample(main_batch(), ctx, resample_frac=0.5, replace_frac=0.25)
    assert out.response_ids.shape == (16, 8) and out.prompt_ids.shape == (16, 3)
    assert torch.all(out.response_ids[3:, 5:] == 1) and torch.all(out.mask[3:, 5:] == 0)
    assert torch.all(out.prompt_mask[3:, 0] == 0) and torch.all(out.prompt_ids[3:, 0] == 1)


def test_bad_settings_are_clear_errors():
    ctx, _ = context(rollout_batch(RESAMPLED, "r", seed=2))
    for kw, match in ((dict(temperature=0.0), "temperature must be finite and > 0"),
                      (dict(resample_frac=1.5), r"resample_frac must be a fraction in \[0, 1\]"),
                      (dict(replace_frac=-0.1), r"replace_frac must be a fraction in \[0, 1\]")):
        with pytest.raises(ValueError, match=match):
            aepo_resample(main_batch(), ctx, **kw)


def test_in_a_training_step_the_resampled_rows_train_with_advantage_one(tmp_path):
    """The recipe's own stages (rollout at T through the trainer, forward passes, grpo, override) on the test task."""
    config = make_config("smoke", recipe="aepo-arbitrary", **{**TINY, "recipe_overrides": {
        "group_transforms": {"resample_frac": 0.5, "replace_frac": 0.25}, "controllers": {"entropy_base": 10.0}}})
    trainer = Trainer(config, tmp_path, progress=False)
    trainer.task = DigitFirst()
    trainer.setup()
    replaced = 0
    for step in range(6):
        batch = trainer.make_batch(step)
        rows = batch.resampled
        replaced += int(rows.sum())
        assert int(rows.sum()) == trainer.rollout_info["aepo/replaced"] and batch.size == 16
        assert torch.equal(batch.advantages[rows], batch.mask[rows].float())
        assert torch.all(batch.scores[rows] == 1.0) and rows[: int(rows.sum())].all()
        kept = batch.select(torch.nonzero(~rows).flatten())
        assert torch.equal(batch.advantages[~rows], grpo(kept, allow_singletons=True).float())
    assert replaced > 0


def test_a_run_that_replaces_rows_resumes_exactly(tmp_path):
    """Re-sampling happens inside the step (seeded by it) and the controller's state is checkpointed."""
    config = make_config("smoke", recipe="aepo-arbitrary", **{**TINY, "recipe_overrides": {
        "group_transforms": {"resample_frac": 0.5, "replace_frac": 0.25}, "controllers": {"entropy_base": 10.0}}})
    assert resumes_exactly(config, tmp_path, task=DigitFirst())
    rows = metric_rows(tmp_path / "straight")
    assert sum(r["aepo/replaced"] for r in rows[2:]) > 0  # after the checkpoint too
    assert len({r["group_transform:aepo-arbitrary.entropy_gap"] for r in rows}) == len(rows)  # state moves each step
