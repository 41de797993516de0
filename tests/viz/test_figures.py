"""Figures draw the library's own math."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from workbench.advantages.group import grpo, rloo
from workbench.batch import RolloutBatch
from workbench.viz import accuracy_bar, advantage_bars, entropy_heatmap, surrogate_curves, training_curves


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


@pytest.mark.parametrize("kw", [{}, {"unbiased": False}, {"scale": "none"}, {"scale": "batch"}])
def test_advantage_bars_match_grpo_and_rloo(kw):
    rewards, group = [1.0, 0.0, 0.5, 1.0, 0.0, 0.0, 1.0], [0, 0, 0, 1, 1, 1, 1]
    fig = advantage_bars(rewards, group, **kw)
    bars = {t.name: np.asarray(t.y, dtype=float) for t in fig.data}
    batch = RolloutBatch.from_rewards(rewards, group)
    np.testing.assert_allclose(bars["reward R"], rewards)
    np.testing.assert_allclose(bars["GRPO A"], grpo(batch, **kw)[:, 0].numpy(), atol=1e-12)
    np.testing.assert_allclose(bars["RLOO A"], rloo(batch)[:, 0].numpy(), atol=1e-12)


def test_advantage_bars_group_of_one_shows_the_error():
    fig = advantage_bars([1.0, 0.0, 1.0], group=[0, 0, 1])
    assert "group of one" in fig.layout.title.text
    assert all(y is None for y in fig.data[1].y)
    assert list(fig.data[0].y) == [1.0, 0.0, 1.0]


def test_entropy_heatmap_shape_text_and_mask():
    tokens = [["The", " cat", "<eos>"], ["1", "+"]]
    entropy = torch.tensor([[0.5, 1.0, 2.0], [0.1, 0.2, 9.0]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    fig = entropy_heatmap(tokens, entropy, mask)
    z = np.asarray(fig.data[0].z, dtype=float)
    assert z.shape == (2, 3)
    assert np.isnan(z[0, 2]) and np.isnan(z[1, 2])  # masked, and past the row's tokens
    assert z[0, 1] == pytest.approx(1.0)
    assert fig.data[0].text[0][0] == "The" and fig.data[0].text[0][2] == ""
    assert "&lt;" in entropy_heatmap([["<eos>"]], [[1.0]]).data[0].text[0][0]


def test_training_curves_multiple_runs_and_missing_keys():
    run_a = [{"step": 0, "reward/mean": 0.1, "kl": 0.0}, {"step": 1, "reward/mean": 0.3, "kl": None},
             {"step": 2, "reward/mean": 0.5, "kl": 0.02}]
    run_b = [{"step": 0, "reward/mean": 0.2, "entropy": 1.5}, {"step": 1, "entropy": 1.2}]
    fig = training_curves({"a": run_a, "b": run_b})
    titles = [a.text for a in fig.layout.annotations]
    assert titles == ["reward/mean", "entropy", "kl"]  # DEFAULT_KEYS order, only those present
    by_run = {}
    for t in fig.data:
        by_run.setdefault(t.name, []).append(t)
    assert len(by_run["a"]) == 2 and len(by_run["b"]) == 2  # a: reward, kl; b: reward, entropy
    kl = next(t for t in by_run["a"] if t.yaxis == "y3")
    assert list(kl.x) == [0, 2]  # the None row is skipped
    assert by_run["a"][0].line.color != by_run["b"][0].line.color
    assert sum(t.showlegend for t in fig.data) == 2  # one legend entry per run
    single = training_curves(run_a, keys=["reward/mean"])
    assert len(single.data) == 1 and list(single.data[0].y) == [0.1, 0.3, 0.5]


def test_accuracy_bar():
    fig = accuracy_bar({"accuracy_before": 0.25, "accuracy_after": 0.75})
    assert list(fig.data[0].y) == [0.25, 0.75]
    with pytest.raises(KeyError, match="accuracy_after"):
        accuracy_bar({"accuracy_before": 0.25})


# ------------------------------------------------------------------------------- comparisons a reader can decode


def test_run_colors_give_every_series_of_the_largest_comparison_its_own_colour():
    from plotly.colors import qualitative

    from workbench import registry
    from workbench.results.stored_runs import COMPARISONS
    from workbench.viz.figures import RUN_COLORS

    one_turn = [e for e in registry.entries("advantage") if e.family != "credit"]  # notebook 05's; F4's: notebook 13
    largest = max([len(r.recipes) for r in COMPARISONS.values()] + [len(one_turn)])
    assert len({c.lower() for c in RUN_COLORS}) == len(RUN_COLORS) >= largest
    assert RUN_COLORS[:10] == list(qualitative.Plotly)  # the first colours, and so every small figure, unchanged


def run_rows(offset, n=6):
    return [{"step": s, "accuracy": min(1.0, offset + 0.1 * s), "entropy": 1.0 - 0.05 * s, "kl": 0.01 * s}
            for s in range(n)]


def bottom_titles(fig):
    """{x axis name: title} of every x axis of the figure."""
    return {name: fig.layout[name].title.text for name in fig.layout if name.startswith("xaxis")}


def test_run_charts_title_the_bottom_x_axis_of_every_column_step():
    from workbench.viz.figures import seed_band_curves

    # 3 panels in 2 columns: the second column's only panel is in the first row, and its x axis is titled too
    for fig in (training_curves({"a": run_rows(0.0)}, keys=["accuracy", "entropy", "kl"]),
                seed_band_curves({"a": [run_rows(0.0), run_rows(0.2)]}, keys=["accuracy", "entropy", "kl"])):
        titles = bottom_titles(fig)
        assert titles["xaxis2"] == titles["xaxis3"] == "step" and titles["xaxis"] is None


def test_seed_bands_say_what_they_are_and_vanish_with_one_seed():
    from workbench.viz.figures import seed_band_curves

    three = seed_band_curves({"a": [run_rows(0.0), run_rows(0.3), run_rows(0.6)]}, keys=["accuracy"])
    band = next(t for t in three.data if t.fill == "toself")
    assert min(band.y) >= 0.0 and max(band.y) <= 1.0  # min–max over seeds of a [0, 1] metric stays inside it
    assert three.layout.title.text == "lines: mean over 3 seeds, bands: min–max"
    one = seed_band_curves({"a": [run_rows(0.0)], "b": [run_rows(0.2)]}, keys=["accuracy"], title="smoke")
    assert not [t for t in one.data if t.fill == "toself"] and len(one.data) == 2
    assert one.layout.title.text == "smoke<br><sup>one seed: each line is that run, no band</sup>"


def test_log_tickvals_never_crowd():
    from workbench.viz.figures import log_tickvals

    assert log_tickvals([0.11, 0.17]) is None  # less than a factor 3: plotly's own ticks
    assert log_tickvals([0.5, 20]) == [0.5, 1, 2, 5, 10, 20]
    assert log_tickvals([5e-4, 0.5]) == pytest.approx([1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3])
    wide = log_tickvals([1e-9, 1.0])
    assert len(wide) <= 6 and all(np.isclose(np.log10(t), round(np.log10(t))) for t in wide)
