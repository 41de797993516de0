"""SPEAR's self-imitation coefficient: 0 at step 0, a half cosine up to c at T, c after; the reference's formula
(dp_actor.py L583-591) at the same step index."""
import math

import numpy as np
import pytest

from workbench import registry
from workbench.schedules.spear import check_sil_coefficient, sil_coefficient, spear_sil

pytestmark = pytest.mark.covers("spear")


def reference_replay_factor(global_steps, replay_loss_coef=1.0, max_replay_loss_steps=200):
    """Transcribed from TencentYoutuResearch/SPEAR @ 7e8431513165640b4b1f78d09ebaae8807ee4f85,
    verl/verl/workers/actor/dp_actor.py L583-591: the factor `loss *=` on the replay loss."""
    if global_steps <= max_replay_loss_steps:
        return replay_loss_coef * (-np.cos((global_steps / max_replay_loss_steps) * np.pi) + 1) / 2
    return replay_loss_coef


def test_the_coefficient_rises_from_0_to_c_and_is_constant_after_t():
    """Card test 1."""
    T, c = 50, 1.0
    values = [spear_sil(t, 100, coef=c, max_replay_loss_steps=T) for t in range(101)]
    assert values[0] == 0.0 and values[T] == pytest.approx(c) and values[T // 2] == pytest.approx(c / 2)
    assert all(a < b for a, b in zip(values[:T], values[1:T + 1]))
    assert all(v == c for v in values[T + 1:])


@pytest.mark.parametrize("coef,T", [(1.0, 200), (1.0, 100), (0.5, 37), (2.0, 1)])
def test_agrees_with_the_reference(coef, T):
    for t in range(0, 3 * T + 2):
        assert sil_coefficient(t, coef=coef, horizon=T) == pytest.approx(reference_replay_factor(t, coef, T),
                                                                        abs=1e-12)


def test_a_fraction_of_the_run_sets_t():
    assert spear_sil(25, 100, max_replay_loss_frac=0.5) == pytest.approx(0.5)  # T = 50
    assert spear_sil(50, 100, max_replay_loss_frac=0.5) == pytest.approx(1.0)
    assert spear_sil(25, 100) == pytest.approx((1 - math.cos(math.pi * 25 / 200)) / 2)  # default T = 200


def test_registration_and_bad_settings():
    entry = registry.get("schedule", "spear")
    assert entry.defaults == {"coef": 1.0, "max_replay_loss_steps": 200, "max_replay_loss_frac": None}
    for bad, message in (({"coef": -1.0}, "replay_loss_coef"), ({"coef": float("nan")}, "coef=nan"),
                         ({"max_replay_loss_steps": 0}, "must be > 0"),
                         ({"max_replay_loss_frac": 0}, "fraction of the run's steps must be > 0")):
        with pytest.raises(ValueError, match=message):
            check_sil_coefficient(**bad)
