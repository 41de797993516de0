"""Agreement with RetroAgent's code (tests/anchors/formulas_retroagent.py, zhangxy-2019/RetroAgent @ 90eb71f):
values, float64, 1e-12.

    _calculate_reflection_coefficient       `reflection_coefficient` (decay "exp" / "hard_cutoff")
    step_reflect + the reflect block         `reward_shaping:retroagent` over several steps: the intrinsic reward of
                                             every row and the per-task baseline (task_potential_history), with the
                                             reflection's subtask fraction given (our `reflector`)
    the clip of the reflect block            `clip_intrinsic`; reference_bug=True reproduces the default lower ratio
    ReflectionMemory (ucb retrieve, EMA)     `simutil_ucb_score`, `utility_update`
"""
from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from tests.helpers import make_batch
from tests.anchors import formulas_retroagent as ref
from workbench.context import StepContext
from workbench.rewards.retroagent import (TaskBaselines, clip_intrinsic, reflection_coefficient, retroagent_rewards,
                                          simutil_ucb_score, utility_update)
from workbench.tasks import Example

pytestmark = pytest.mark.covers("retroagent")
TOL = 1e-12


def test_coefficient_matches_calculate_reflection_coefficient():
    for total in (1, 7, 150):
        for step in range(0, total + 3):
            for hard in (False, True):
                theirs = ref.calculate_reflection_coefficient(step, total, hard_cutoff=hard)
                ours = reflection_coefficient(step / total, decay="hard_cutoff" if hard else "exp")
                assert ours == pytest.approx(theirs, abs=TOL), (step, total, hard)


@pytest.mark.parametrize("group_relative", [False, True])
@pytest.mark.parametrize("hard_cutoff", [False, True])
def test_intrinsic_rewards_and_baselines_match_step_reflect_over_steps(group_relative, hard_cutoff):
    rng, G, total = random.Random(3), 4, 12
    env = ref.EnvState(G, group_relative_intrinsic_rewards=group_relative)
    state = TaskBaselines()
    for step in range(total):
        tasks = [rng.choice(["t0", "t1", "t2", "t3"]) for _ in range(3)]
        rows = [t for t in tasks for _ in range(G)]
        phis = [rng.choice([0.0, 0.25, 0.5, 0.75, 1.0]) for _ in rows]
        wons = [rng.random() < 0.3 for _ in rows]
        env.reset(rows)
        final, _ = env.step_reflect(phis, wons)
        coef = ref.calculate_reflection_coefficient(step, total, hard_cutoff=hard_cutoff)
        theirs = ref.reflect_rewards(final, coef)

        batch = make_batch([0.0] * len(rows), [g for g in range(3) for _ in range(G)])
        batch.scores = torch.tensor([float(w) for w in wons], dtype=torch.float64)
        batch.completions = [str(i) for i in range(len(rows))]
        ctx = StepContext(step=step, total_steps=total, seed=0, group_size=G, prompts_per_step=3, max_new_tokens=4,
                          examples=[Example(t, "", "") for t in tasks], state=state)
        out = retroagent_rewards(batch, ctx, decay="hard_cutoff" if hard_cutoff else "exp",
                                 group_relative=group_relative,
                                 reflector=lambda text, example, steps, score: 1.0 if score >= 1 else phis[int(text)])
        np.testing.assert_allclose(out.rewards.numpy(), theirs, rtol=0, atol=TOL)
        for task in ("t0", "t1", "t2", "t3"):
            assert state.best.get(task, 0.0) == pytest.approx(env.task_potential_history.get(task, 0.0), abs=TOL)
    assert any(v > 0 for v in env.task_potential_history.values())


def test_clip_matches_the_reflect_block_and_its_default_lower_ratio():
    x = np.random.default_rng(0).normal(0, 1, 50)
    t = torch.tensor(x)
    np.testing.assert_allclose(clip_intrinsic(t).numpy(), ref.reflect_rewards(x, 1.0), rtol=0, atol=TOL)  # off
    both = ref.reflect_rewards(x, 1.0, instrinsic_rewards_upper_clipping_ratio=0.3,
                               instrinsic_rewards_lower_clipping_ratio=0.2)
    np.testing.assert_allclose(clip_intrinsic(t, clip_high=0.3, clip_low=0.2).numpy(), both, rtol=0, atol=TOL)
    upper_only = ref.reflect_rewards(x, 1.0, instrinsic_rewards_upper_clipping_ratio=0.3)
    assert np.all(upper_only == 0.3)  # the reference's lower bound is -(-5) = 5 > 0.3: every reward is 0.3
    np.testing.assert_allclose(clip_intrinsic(t, clip_high=0.3, reference_bug=True).numpy(), upper_only, rtol=0,
                               atol=TOL)
    fixed = clip_intrinsic(t, clip_high=0.3).numpy()
    assert np.all(fixed <= 0.3) and np.allclose(fixed[x < 0.3], x[x < 0.3])  # ours: an open lower side


def test_simutil_ucb_score_and_utility_ema_match_reflection_memory():
    rng = random.Random(5)
    for _ in range(200):
        rel, util, n, N = rng.random(), rng.random(), rng.randrange(0, 30), rng.randrange(0, 500)
        alpha, scale = rng.choice([0.6, 0.3]), rng.choice([1.0, 0.5])
        assert simutil_ucb_score(rel, util, n, N, alpha=alpha, ucb_scale=scale) == pytest.approx(
            ref.ucb_final_score(rel, util, n, N, alpha=alpha, ucb_scale=scale), abs=TOL)
        s, beta = rng.random(), rng.choice([0.1, 0.05])
        assert utility_update(util, s, beta=beta) == pytest.approx(ref.update_score_internal(util, s, beta), abs=TOL)
