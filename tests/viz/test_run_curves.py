"""Curves of what runs logged: every logged point drawn where it belongs, one colour and one legend entry per run,
seed bands that say what they are, the evaluation before training prepended as step -1, and a method's logged state
(clip fractions, BAPO's bounds, R²VPO's dual variable) drawn from its rows."""
from __future__ import annotations

import pytest

from tests.viz.test_tables import SUMMARIES
from workbench.viz.entropy_controls import EVAL_CURVES
from workbench.viz.run_curves import (accuracy_bar, bapo_bounds_figure, clip_fraction_figure, dual_ascent_figure,
                                      seed_band_curves, staleness_figure, training_curves, with_start)


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


def run_rows(offset, n=6):
    return [{"step": s, "accuracy": min(1.0, offset + 0.1 * s), "entropy": 1.0 - 0.05 * s, "kl": 0.01 * s}
            for s in range(n)]


def bottom_titles(fig):
    """{x axis name: title} of every x axis of the figure."""
    return {name: fig.layout[name].title.text for name in fig.layout if name.startswith("xaxis")}


def test_run_charts_title_the_bottom_x_axis_of_every_column_step():
    # 3 panels in 2 columns: the second column's only panel is in the first row, and its x axis is titled too
    for fig in (training_curves({"a": run_rows(0.0)}, keys=["accuracy", "entropy", "kl"]),
                seed_band_curves({"a": [run_rows(0.0), run_rows(0.2)]}, keys=["accuracy", "entropy", "kl"])):
        titles = bottom_titles(fig)
        assert titles["xaxis2"] == titles["xaxis3"] == "step" and titles["xaxis"] is None


def test_seed_bands_say_what_they_are_and_vanish_with_one_seed():
    three = seed_band_curves({"a": [run_rows(0.0), run_rows(0.3), run_rows(0.6)]}, keys=["accuracy"])
    band = next(t for t in three.data if t.fill == "toself")
    assert min(band.y) >= 0.0 and max(band.y) <= 1.0  # min–max over seeds of a [0, 1] metric stays inside it
    assert three.layout.title.text == "lines: mean over 3 seeds, bands: min–max"
    one = seed_band_curves({"a": [run_rows(0.0)], "b": [run_rows(0.2)]}, keys=["accuracy"], title="smoke")
    assert not [t for t in one.data if t.fill == "toself"] and len(one.data) == 2
    assert one.layout.title.text == "smoke<br><sup>one seed: each line is that run, no band</sup>"


def test_with_start_prepends_the_evaluation_before_training():
    groups = {"grpo": [[{"step": 0, "entropy": 0.5}, {"step": 19, "eval/pass@k": 0.7}], [{"step": 0}]],
              "clip_cov": [[{"step": 0}]]}
    out = with_start(groups, SUMMARIES)
    first = out["grpo"][0][0]
    assert first == {"step": -1, "eval/accuracy": 0.3, "eval/pass@1": 0.3, "eval/pass@k": 0.75, "eval/entropy": 0.52}
    assert out["grpo"][1][0]["eval/pass@k"] == 0.75 and out["grpo"][0][1:] == groups["grpo"][0]
    assert out["clip_cov"][0][0] == {"step": -1, "eval/accuracy": 0.3}
    assert groups["grpo"][0][0] == {"step": 0, "entropy": 0.5}  # the input is not modified
    assert set(EVAL_CURVES) == {"entropy", "eval/accuracy", "eval/pass@1", "eval/pass@k"}


# ------------------------------------------------------------------------------- a method's logged state


def test_clip_fraction_and_staleness_figures():
    records = [{"mu": 1, "update": 1, "clip/region": 0.0}, {"mu": 2, "update": 1, "clip/region": 0.0},
               {"mu": 2, "update": 2, "clip/region": 0.02}, {"mu": 2, "update": 2, "clip/region": 0.04}]
    fig = clip_fraction_figure(records)
    lines = {t.name: list(t.y) for t in fig.data if t.type == "scatter"}
    assert lines == {"μ = 1": [0.0], "μ = 2": [0.0, pytest.approx(0.03)]}
    bars = next(t for t in fig.data if t.type == "bar")
    assert list(bars.y) == [0.0, pytest.approx(0.02)]  # the logged per-batch mean includes the first step
    stale = staleness_figure([{"staleness": k, "clip/region": 0.01 * k, "clip/out_of_band": 0.02 * k}
                              for k in range(3)])
    assert [list(t.x) for t in stale.data] == [[0, 1, 2], [0, 1, 2]]


def test_run_figures_draw_the_logged_rows():
    rows = [{"step": s, "bapo/c_low": 0.6 + 0.05 * s, "bapo/c_high": 1.2 + 0.1 * s, "bapo/pos_share": 0.45 + 0.02 * s,
             "objective:r2vpo.lam": max(0.0, 1 - 0.3 * s), "r2vpo/ratio_var": 0.01} for s in range(4)]
    fig = bapo_bounds_figure(rows)
    assert [list(t.y) for t in fig.data] == [[r["bapo/c_high"] for r in rows], [r["bapo/c_low"] for r in rows],
                                             [r["bapo/pos_share"] for r in rows]]
    assert {s.y0 for s in fig.layout.shapes} == {0.6, 0.8, 1.2, 2.0, 0.5}  # starts, maxima and rho0
    fig = dual_ascent_figure({"delta = 0.02": (rows, 0.02), "tight": (rows[:2], 0.005)})
    assert list(fig.data[0].y) == [r["objective:r2vpo.lam"] for r in rows] and len(fig.data[2].x) == 2
    assert {s.y0 for s in fig.layout.shapes} == {0.02, 0.005}
