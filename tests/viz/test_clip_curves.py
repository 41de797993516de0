"""One objective against the ratio: the plotted value and gradient weight are PPO-clip's closed forms."""
from __future__ import annotations

import numpy as np
import pytest

from workbench.viz.clip_curves import surrogate_curves

# Band edges (0.8, 1.2, 1.28) and the dual-clip cap are not on this grid: at a tie the max() splits
# the gradient, which is a measure-zero detail and not what the figure is about.
RATIOS = np.round(np.arange(0.05, 2.5, 0.1), 6)


def analytical_weight(r, A, eps_low, eps_high, dual_c=None):
    """d(-l)/d(log pi) of PPO-clip: A r on the unclipped side, 0 where the clipped branch or the cap is active."""
    clipped = (A > 0 and r > 1 + eps_high) or (A < 0 and r < 1 - eps_low)
    capped = dual_c is not None and A < 0 and r > dual_c
    return 0.0 if clipped or capped else A * r


def traces(fig, name):
    """(objective trace, gradient-weight trace) named `name`."""
    objective, weight = [t for t in fig.data if t.name == name]
    return np.asarray(objective.y, dtype=float), np.asarray(weight.y, dtype=float)


@pytest.mark.parametrize("hp", [
    {"eps_low": 0.2, "eps_high": 0.2},
    {"eps_low": 0.2, "eps_high": 0.28, "dual_clip_c": 2.0},
])
@pytest.mark.parametrize("magnitude", [1.0, 0.5])
def test_surrogate_gradient_weight_is_analytical_ppo_weight(hp, magnitude):
    fig = surrogate_curves("ppo-clip", magnitude, ratios=RATIOS, **hp)
    for A in (magnitude, -magnitude):
        value, weight = traces(fig, f"A = {A:+g}")
        expected = [analytical_weight(r, A, hp["eps_low"], hp["eps_high"], hp.get("dual_clip_c")) for r in RATIOS]
        np.testing.assert_allclose(weight, expected, atol=1e-12)
        # and the plotted value is -l = min(rA, clip(r) A), capped at c A for A < 0
        clipped = np.clip(RATIOS, 1 - hp["eps_low"], 1 + hp["eps_high"])
        expected_value = np.minimum(RATIOS * A, clipped * A)
        if hp.get("dual_clip_c") and A < 0:
            expected_value = np.maximum(expected_value, hp["dual_clip_c"] * A)
        np.testing.assert_allclose(value, expected_value, atol=1e-12)


def test_surrogate_shades_clip_band_and_marks_dual_cap():
    fig = surrogate_curves("ppo-clip", 1.0, ratios=RATIOS, eps_low=0.1, eps_high=0.3, dual_clip_c=2.0)
    bands = [s for s in fig.layout.shapes if s.type == "rect"]
    assert len(bands) == 2 and all((s.x0, s.x1) == (pytest.approx(0.9), pytest.approx(1.3)) for s in bands)
    assert any(s.type == "line" and s.x0 == 2.0 for s in fig.layout.shapes)
    # the registered "dual-clip" objective defaults to c = 3
    dual = surrogate_curves("dual-clip", 1.0, ratios=RATIOS)
    assert any(s.type == "line" and s.x0 == 3.0 for s in dual.layout.shapes)
    _, weight = traces(dual, "A = -1")
    assert np.all(weight[RATIOS > 3.0] == 0)
