"""SAFE's threshold controller: KL EMAs, PID on the reward velocity, phase detection, and what it drives."""
import random

import pytest
import torch

from tests.helpers import D, batch_with_mask, step_context
from workbench import registry
from workbench.controllers.safe import SafeKLControl, detect_phase
from workbench.recipes import get_recipe
from workbench.train.pipeline import Pipeline


def run(rewards, kls=None):
    state = SafeKLControl.init(initial={"kl_short_decay": 0.9})
    out = []
    for i, r in enumerate(rewards):
        row = {"reward/mean": r, **({"safe/kl": kls[i]} if kls is not None else {})}
        state = SafeKLControl.update(state, None, row)
        out.append((state.threshold, state.integral, state.phase, state.kl_short))
    return state, out


@pytest.mark.covers("safe-kl-control")
def test_registered_with_the_reference_gains_and_first_threshold():
    e = registry.get("controller", "safe-kl-control")
    assert e.defaults == {"base_threshold": 0.3, "kp": 0.3, "ki": 0.01, "kd": 0.05}
    state = SafeKLControl.init(initial={})
    assert SafeKLControl.value(state) == {"threshold": pytest.approx(0.45), "kl_short_prev": 0.0}
    assert SafeKLControl.init(initial={"kl_short_decay": 0.5}).kl_short_decay == 0.5


@pytest.mark.covers("safe-kl-control")
@pytest.mark.parametrize("seed", range(5))
def test_threshold_stays_in_its_band_and_the_integral_in_minus_one_one(seed):
    rng = random.Random(seed)
    rewards = [rng.choice([-50.0, 50.0]) * rng.random() if i % 7 else rng.random() for i in range(300)]
    _, out = run(rewards)
    assert all(0.1 <= th <= 0.6 for th, *_ in out) and all(-1.0 <= i <= 1.0 for _, i, *_ in out)
    assert min(th for th, *_ in out) == 0.1 and max(th for th, *_ in out) == 0.6  # the clip is exercised
    assert max(abs(i) for _, i, *_ in out) == 1.0  # the anti-windup clamp too


@pytest.mark.covers("safe-kl-control")
def test_phases_follow_the_reward_windows():
    assert detect_phase([0.5] * 49, 49) == "WARMUP"
    assert detect_phase([0.1] * 50 + [0.5] * 50, 100) == "CLIMBING"
    assert detect_phase([0.9] * 100, 100) == "CONVERGED"
    assert detect_phase([0.3] * 100, 100) == "PLATEAU"
    assert detect_phase([0.9, 0.7] * 50, 100) == "PLATEAU"  # high but noisy (std 0.1 >= 0.02)
    _, out = run([0.0] * 60 + [i / 100 for i in range(100)] + [0.95] * 150)
    phases = [p for *_, p, _ in out]
    assert set(phases[:49]) == {"WARMUP"} and phases[49] != "WARMUP"
    assert "CLIMBING" in phases[100:160] and phases[-1] == "CONVERGED"
    # in the warm-up with a flat reward the PID is -0.3 e_target-ish: theta = (0.3 + PID) x 1.5
    th, *_ = out[10]
    assert th == pytest.approx((0.3 + 0.3 * -0.001 + 0.01 * (-0.001 * 10) + 0.0) * 1.5, rel=1e-9)


@pytest.mark.covers("safe-kl-control")
def test_kl_emas_follow_the_logged_kl_and_skip_steps_that_trained_nothing():
    state, out = run([0.5] * 4, kls=[1.0, 1.0, 0.0, 2.0])
    assert [round(k, 6) for *_, k in out] == [0.1, 0.19, 0.171, 0.3539]
    assert state.kl_long == pytest.approx(((0.01 * 0.99 + 0.01) * 0.99) * 0.99 + 0.02)
    before = state.kl_short
    state = SafeKLControl.update(state, None, {"reward/mean": 0.5})  # no safe/kl: nothing was trained
    assert state.kl_short == before and state.n_rewards == 5


@pytest.mark.covers("safe", "safe-kl-control")
@pytest.mark.parametrize("recipe", ["safe", "safe-kl-control"])
def test_the_recipe_drives_threshold_and_kl_short_into_its_penalty(recipe):
    pipe = Pipeline(get_recipe(recipe))
    reg = pipe.find(f"regularizer:{recipe}")
    assert pipe.kwargs(reg, 0, 10)["threshold"] == pytest.approx(0.45)
    batch = batch_with_mask([0.0], [0], torch.ones(1, 2, dtype=D))
    pipe.after_step(batch, {"step": 0, "reward/mean": 0.4, "safe/kl": 0.5}, step_context())
    pipe.after_step(batch, {"step": 1, "reward/mean": 0.6, "safe/kl": 0.5}, step_context())
    kw = pipe.kwargs(reg, 2, 10)
    assert kw["kl_short_prev"] == pytest.approx(0.095)
    error = 0.05 * 0.2 - 0.001
    assert kw["threshold"] == pytest.approx((0.3 + 0.3 * error + 0.01 * error + 0.05 * error) * 1.5)
    assert pipe.driven_metrics(2, 10) == {f"regularizer:{recipe}.threshold": kw["threshold"],
                                          f"regularizer:{recipe}.kl_short_prev": kw["kl_short_prev"]}


@pytest.mark.covers("safe-kl-control")
@pytest.mark.parametrize("bad, match", [(dict(base_threshold=0.0), "base_threshold"), (dict(kp=-1.0), "PID gains")])
def test_bad_parameters_are_refused(bad, match):
    with pytest.raises(ValueError, match=match):
        SafeKLControl.init(initial={}, **bad)
