"""Notebook 15's figures draw what the components hold: a pool's pass rates per prompt and step, a buffer's rows by
age and reward, RoC's kept rows per group, and the efficiency table's numbers."""
import math

import torch

from workbench.transforms.grpo_roc import roc_kept
from workbench.viz import data_figures as df

POOL = {"prompts": [{"id": 0, "prompt": "a", "pass_rates": [[0, 0.5], [2, 1.0]]},
                    {"id": 1, "prompt": "b", "pass_rates": [[1, 0.0]]},
                    {"id": 2, "prompt": "c", "pass_rates": []}]}


def test_the_pass_rate_grid_puts_each_rate_at_its_prompt_and_step():
    ids, steps, grid = df.pass_rate_grid(POOL)
    assert ids == [0, 1, 2] and steps == [0, 1, 2]  # by mean pass rate, never-sampled last
    assert grid[0][0] == 0.5 and grid[0][2] == 1.0 and math.isnan(grid[0][1])
    assert grid[1][1] == 0.0 and all(math.isnan(x) for x in grid[2])
    assert df.pass_rate_grid(POOL, order=[2, 1, 0])[0] == [2, 1, 0]
    fig = df.pass_rate_heatmap(POOL, labels={0: "2n"})
    assert list(fig.data[0].y) == ["2n #0", "#1", "#2"]


def test_buffer_mix_counts_rows_by_age_and_their_rewards():
    view = lambda ages, rewards: {"entries": [{"age": a, "reward": r} for a, r in zip(ages, rewards)],  # noqa: E731
                                  "prompts": len(ages)}
    mix = df.buffer_mix([(5, view([0, 3, 7], [1.0, 0.0, 1.0])), (10, view([45, 12], [0.0, 0.0]))])
    assert mix["steps"] == [5, 10]
    assert [row[0] for row in mix["ages"]] == [2, 1, 0, 0, 0] and [row[1] for row in mix["ages"]] == [0, 0, 1, 0, 1]
    assert mix["mean_reward"] == [2 / 3, 0.0] and mix["success"] == [2 / 3, 0.0]
    assert len(df.buffer_mix_figure([(5, view([0], [1.0]))]).data) == 7  # 5 age bins + 2 lines


def test_roc_grid_marks_the_kept_rows_and_the_dropped_equal_groups():
    rewards = torch.tensor([1.0, 0, 0, 0, 1, 1, 1, 1.0])
    group = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    penalty = torch.tensor([0.5, 1, 1, 1, 1, 1, 1, 1.0])
    kept, informative = roc_kept(rewards, group, penalty, keep=2, min_negative=1, min_positive=1)
    grid = df.roc_grid(rewards, group, penalty, kept)
    assert [g["informative"] for g in grid] == [True, False]
    assert grid[0]["kept"] == [True, True, False, False] and grid[1]["kept"] == [False] * 4
    assert informative.tolist() == [True] * 4 + [False] * 4
    assert sum(len(t.x) for t in df.roc_figure(grid).data) == 8


def test_efficiency_rows_report_accuracy_rollouts_and_spread():
    rows = lambda n: [{"step": 0, "rollouts/total": n, "frac_zero_std_groups": 0.5, "time/step": 1.0},  # noqa: E731
                      {"step": 1, "rollouts/total": 2 * n, "frac_zero_std_groups": 0.3, "time/step": 3.0}]
    groups = {"roc": [rows(200)], "grpo": [rows(100)]}
    summaries = [{"recipe": "grpo", "seed": 0, "accuracy_before": 0.2, "accuracy_after": 0.4},
                 {"recipe": "roc", "seed": 0, "accuracy_before": 0.2, "accuracy_after": 0.4}]
    out = df.efficiency_rows(groups, summaries)
    assert [r["recipe"] for r in out] == ["grpo", "roc"]
    assert out[0]["rollouts"] == 200 and out[1]["rollouts"] == 400
    assert out[0]["gain / 1k rollouts"] == 1.0 and out[1]["gain / 1k rollouts"] == 0.5
    assert out[0]["groups without spread"] == 0.4 and out[0]["s / step"] == 2.0
