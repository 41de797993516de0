"""The credit figures draw the numbers the exact comparison computes."""
import math

import pytest

from workbench.advantages import exact as ce
from workbench.viz.credit_comparisons import (
    advantage_heatmaps,
    against_baseline_grid,
    bias_variance_figure,
    table_rows,
    turn_grid,
)


def group():
    mdp = ce.keydoor_mdp(length=2, slack=1)
    policy = ce.noisy_optimal_policy(mdp, eps=0.4)
    return mdp, policy, ce.exact_values(mdp, policy), ce.sample_groups(mdp, policy, n_groups=1, group_size=4)[0]


def test_the_exact_grid_is_each_actions_exact_advantage_and_nan_past_the_end():
    mdp, policy, exact, episodes = group()
    grid = turn_grid(mdp, policy, episodes, None, exact)
    for e, row in zip(episodes, grid):
        assert row[:len(e.actions)] == pytest.approx([exact.advantage(tuple(e.actions[:s]), a)
                                                      for s, a in enumerate(e.actions)])
        assert all(math.isnan(v) for v in row[len(e.actions):])
    td = next(est for est in ce.ESTIMATORS if est.label == "gae λ=0, exact V")
    for ours, theirs in zip(turn_grid(mdp, policy, episodes, td, exact), grid):
        assert ours == pytest.approx(theirs, nan_ok=True, abs=1e-6)


def test_the_heatmaps_share_one_symmetric_scale_and_the_bars_rank_by_mse():
    mdp, policy, exact, episodes = group()
    fig = advantage_heatmaps(mdp, policy, episodes, ce.ESTIMATORS[0], exact)
    assert len(fig.data) == 2 and fig.data[0].zmax == fig.data[1].zmax == -fig.data[0].zmin
    rows = [{"estimator": "a", "abs_bias": 0.1, "variance": 0.04, "mse": 0.05, "corr": 0.5, "note": ""},
            {"estimator": "b", "abs_bias": 0.0, "variance": 0.0, "mse": 0.0, "corr": 1.0, "note": ""}]
    bars = bias_variance_figure(rows)
    assert list(bars.data[0].y) == ["a", "b"] and list(bars.data[1].x) == pytest.approx([0.2, 0.0])  # best on top
    assert table_rows(rows)[0]["|bias|"] == 0.1


def test_each_method_gets_a_panel_with_its_band_and_the_baselines():
    def seed(values):  # eval rows at steps 0 and 10
        return [{"step": 0, "eval/pass@1": values[0]}, {"step": 10, "eval/pass@1": values[1]}]

    groups = {"grpo": [seed([0.4, 0.5]), seed([0.4, 0.7])], "a": [seed([0.4, 0.9]), seed([0.4, 0.8])],
              "b": [seed([0.4, 0.2]), seed([0.4, 0.4])]}
    fig = against_baseline_grid(groups, cols=2)
    assert [a.text for a in fig.layout.annotations] == ["a", "b"]  # one panel per method, the baseline in each
    lines = [t for t in fig.data if t.mode == "lines+markers"]
    assert [t.name for t in lines] == ["grpo", "a", "grpo", "b"]
    assert list(lines[1].y) == pytest.approx([0.4, 0.85]) and list(lines[2].y) == pytest.approx([0.4, 0.6])
    bands = [t for t in fig.data if t.fill == "toself"]
    assert list(bands[3].y) == pytest.approx([0.4, 0.4, 0.2, 0.4])  # b: max at steps 0, 10, then min back
    assert fig.layout.showlegend is False and "grey" in fig.layout.title.text  # the title names the colours


def test_a_panel_can_put_another_metric_on_x_averaged_over_seeds():
    def seed(total):  # eval rows at steps -1 (the warm start: no rollouts yet) and 10
        return [{"step": -1, "eval/accuracy": 0.2}, {"step": 10, "eval/accuracy": 0.3, "rollouts/total": total}]

    groups = {"grpo": [seed(100), seed(100)], "roc": [seed(200), seed(220)]}
    fig = against_baseline_grid(groups, key="eval/accuracy", x_key="rollouts/total")
    lines = [t for t in fig.data if t.mode == "lines+markers"]
    assert list(lines[0].x) == [0, 100] and list(lines[1].x) == [0, 210]
    assert fig.layout.xaxis.title.text == "rollouts/total"
