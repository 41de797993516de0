"""The adaptive KL controller: beta moves toward the KL target, by bounded steps."""
import pytest

from workbench.controllers import AdaptiveKLController


@pytest.mark.covers("kl-penalty")
@pytest.mark.parametrize("current_kl", [0.0, 3.0, 5.999, 6.0, 6.001, 7.0, 100.0])
def test_adaptive_kl_beta_increases_iff_kl_above_target(current_kl):
    ctl = AdaptiveKLController(beta=0.1, target=6.0, horizon=10000)
    new = ctl.update(current_kl, n_steps=256)
    assert (new > 0.1) == (current_kl > 6.0)
    assert (new < 0.1) == (current_kl < 6.0)
    assert ctl.beta == new


@pytest.mark.covers("kl-penalty")
@pytest.mark.parametrize("n_steps", [1, 64, 1000])
def test_adaptive_kl_step_is_bounded(n_steps):
    horizon = 10000
    bound = 0.2 * n_steps / horizon
    for current_kl in [0.0, 1.0, 5.0, 6.5, 7.2, 50.0, 1e6]:
        ctl = AdaptiveKLController(beta=0.3, target=6.0, horizon=horizon)
        ratio = ctl.update(current_kl, n_steps) / 0.3
        assert 1 - bound - 1e-15 <= ratio <= 1 + bound + 1e-15
    ctl = AdaptiveKLController(beta=0.3, target=6.0, horizon=horizon)
    assert ctl.update(1e6, n_steps) == pytest.approx(0.3 * (1 + bound))
    assert ctl.update(0.0, n_steps) == pytest.approx(0.3 * (1 + bound) * (1 - bound))
    zero = AdaptiveKLController(beta=0.0)
    assert zero.update(100.0, n_steps) == 0.0
