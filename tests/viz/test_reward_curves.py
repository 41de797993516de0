"""The reward curves follow the library: the reward stage's aggregation and GRPO, the registered length rewards,
ARLCP's penalty, the length-bias proxy under CGPO's judges, the per-reward curves of a run, the stored comparisons
read through `stored_runs.load`, and the process-reward pictures. Fast: no model."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from workbench import registry
from workbench.results.stored_runs import load
from workbench.viz.reward_curves import (AGG_CORRECT, AGG_LENGTHS, CELL_KINDS, HACK_GROUPS, aggregation_advantages,
                                         aggregation_explorer, aggregation_figure, aggregation_sweep, arlcp_grid,
                                         cgpo_settings, checklist_episode, checklist_grid_figure, combined_rewards,
                                         fapo_figure, fapo_rows, family_recipes, grpo_advantages, hacking_figure,
                                         hacking_rewards, length_explorer, length_proxy, length_reward_curves,
                                         length_reward_figure, length_table, per_reward_figure, per_reward_series,
                                         reflection_figure, reward_names, reward_spread, schedules, schedules_figure,
                                         ssl_figure, ssl_tiers, stored_summary, stored_summary_text)
from workbench.viz.run_curves import seed_band_curves
from workbench.viz.tables import before_after_table


def zscore(x):
    x = np.asarray(x, float)
    return (x - x.mean()) / (x.std(ddof=1) + 1e-4)


def grpo_by_hand(r):
    r = np.asarray(r, float)
    return (r - r.mean()) / (r.std(ddof=1) + 1e-6)


# ---------------------------------------------------------------------------------------------- aggregation


def test_length_proxy_is_the_registered_length_bias():
    np.testing.assert_allclose(length_proxy([0, 5, 10, 12], 10), [0.0, 0.5, 1.0, 1.0])


def test_combined_rewards_are_the_two_aggregations():
    values = np.array([[1, 0.5], [0, 0.9], [0, 0.4], [1, 0.6]])
    w = [1.0, 0.5]
    np.testing.assert_allclose(combined_rewards(values, w, "sum_then_normalize").numpy(), values @ w)
    by_hand = zscore(values[:, 0]) + 0.5 * zscore(values[:, 1])
    np.testing.assert_allclose(combined_rewards(values, w, "normalize_then_sum").numpy(), by_hand)
    with_nan = values.copy()
    with_nan[1, 1] = np.nan  # not applicable: left out of the sum
    assert combined_rewards(with_nan, w, "sum_then_normalize")[1] == pytest.approx(0.0)
    np.testing.assert_allclose(grpo_advantages([1.0, 0.0, 0.0, 1.0]), grpo_by_hand([1, 0, 0, 1]))


def test_aggregation_advantages_by_hand():
    d = aggregation_advantages(scale=10.0, weight=0.5)
    proxy = 10 * np.asarray(AGG_LENGTHS) / 10
    summed = np.asarray(AGG_CORRECT) + 0.5 * proxy
    np.testing.assert_allclose(d["sum_then_normalize"]["rewards"], summed)
    np.testing.assert_allclose(d["sum_then_normalize"]["advantages"], grpo_by_hand(summed), atol=1e-9)
    normalized = zscore(AGG_CORRECT) + 0.5 * zscore(proxy)
    np.testing.assert_allclose(d["normalize_then_sum"]["rewards"], normalized, atol=1e-9)
    right = np.asarray(AGG_CORRECT, bool)
    assert d["sum_then_normalize"]["correct_mean"] == pytest.approx(grpo_by_hand(summed)[right].mean())
    # at scale 10 the proxy drowns correctness under the sum, not under z-scores first
    assert not d["sum_then_normalize"]["dominant"] and d["normalize_then_sum"]["dominant"]
    assert d["sum_then_normalize"]["correct_mean"] < 0 < d["normalize_then_sum"]["correct_mean"]
    small = aggregation_advantages(scale=1.0, weight=0.5)
    assert small["sum_then_normalize"]["dominant"] and small["normalize_then_sum"]["dominant"]
    # normalize_then_sum does not see the scale; a large weight still lets the anti-correlated proxy win
    np.testing.assert_allclose(small["normalize_then_sum"]["advantages"], d["normalize_then_sum"]["advantages"],
                               atol=1e-3)  # up to the 1e-4 added to each std
    assert not aggregation_advantages(scale=1.0, weight=1.0)["normalize_then_sum"]["dominant"]


def test_aggregation_sweep_and_figure():
    sweep = aggregation_sweep([0.1, 1.0, 10.0, 100.0])
    s, n = sweep["sum_then_normalize"], sweep["normalize_then_sum"]
    assert np.all(np.diff(s) < 0) and s[0] > 0 > s[-1]  # the right answers lose their advantage as the scale grows
    np.testing.assert_allclose(n, n[0], atol=3e-3)     # flat: the scale cancels (up to the std's + 1e-4)
    fig = aggregation_figure(scale=10.0, weight=0.5)
    d = aggregation_advantages(10.0, 0.5)
    np.testing.assert_allclose(fig.data[0].y, d["sum_then_normalize"]["advantages"])
    np.testing.assert_allclose(fig.data[1].y, d["normalize_then_sum"]["advantages"])
    assert fig.data[4].x == (10.0,) and fig.data[4].y[0] == pytest.approx(d["sum_then_normalize"]["correct_mean"])
    assert "correctness drowned" in fig.layout.annotations[0].text
    assert "right answers on top" in fig.layout.annotations[1].text


def test_aggregation_explorer_redraws_in_place():
    box = aggregation_explorer()
    fig, c = box.figure, box.controls
    n = len(fig.data)
    np.testing.assert_allclose(fig.data[0].y, aggregation_figure().data[0].y)  # the static picture is the default
    c["scale"].value = 1.0
    c["weight"].value = 1.0
    expected = aggregation_figure(1.0, 1.0)
    assert len(fig.data) == n
    for got, want in zip(fig.data, expected.data):
        np.testing.assert_allclose(np.asarray(got.y, float), np.asarray(want.y, float))
    assert fig.layout.title.text == expected.layout.title.text


# ---------------------------------------------------------------------------------------------- length rewards


def test_length_reward_curves_follow_the_formulas():
    L, C = 10, 2
    d = length_reward_curves(L, C)
    n = d["lengths"]
    assert list(n) == list(range(1, 11))
    cos = (1 + np.cos(np.pi * n / L)) / 2
    np.testing.assert_allclose(d["cosine_correct"], 0.5 + 0.5 * cos)
    np.testing.assert_allclose(d["cosine_wrong"], -0.5 - 0.5 * cos)
    np.testing.assert_allclose(d["soft_overlong"], np.where(n > L - C, ((L - C) - n) / C, 0.0))
    assert d["soft_overlong"][-1] == -1.0
    assert d["budgets"] == (1, 3, 5, 6)  # the paper's 512..2560 of a 4096 context, scaled to L = 10
    for b in d["budgets"]:
        within = np.cos(np.pi * b / (2 * L))
        over = np.cos(np.pi * n / (2 * L)) - 1e-3 * np.abs(n - b)
        np.testing.assert_allclose(d["hbpo"][b], np.where(n <= b, within, over), atol=1e-12)
    assert all(d["hbpo"][b][0] > 0 for b in d["budgets"])  # every budget below L pays a right answer
    np.testing.assert_allclose(d["hbpo_wrong"], 0.0)
    with pytest.raises(ValueError, match="buffer"):
        length_reward_curves(10, 11)


def test_length_reward_figure_draws_the_curves_and_the_buffer():
    fig = length_reward_figure(max_len=12, buffer=3, alpha=0.01)
    d = length_reward_curves(12, 3, 0.01)
    np.testing.assert_allclose(fig.data[0].y, d["cosine_correct"])
    np.testing.assert_allclose(fig.data[1].y, d["cosine_wrong"])
    np.testing.assert_allclose(fig.data[2].y, d["soft_overlong"])
    for trace, b in zip(fig.data[3:7], d["budgets"]):
        np.testing.assert_allclose(trace.y, d["hbpo"][b])
    assert fig.data[7].type == "heatmap"
    buffer = fig.layout.shapes[0]
    assert (buffer.x0, buffer.x1) == (9, 12)
    assert len([s for s in fig.layout.shapes if s.type == "line"]) == 2  # the bracket edges c = 40, 80


def test_length_explorer_redraws_and_bounds_the_buffer():
    box = length_explorer()
    fig, c = box.figure, box.controls
    n = len(fig.data)
    c["max_len"].value = 20
    c["buffer"].value = 15
    assert c["buffer"].max == 20
    expected = length_reward_figure(20, 15, c["alpha"].value)
    assert len(fig.data) == n
    for got, want in zip(fig.data[:7], expected.data[:7]):
        np.testing.assert_allclose(np.asarray(got.y, float), np.asarray(want.y, float))
    assert (fig.layout.shapes[0].x0, fig.layout.shapes[0].x1) == (5, 20)
    c["max_len"].value = 6  # below the buffer: the buffer is clamped first, then the figure redrawn
    assert c["buffer"].value == 6 and (fig.layout.shapes[0].x0, fig.layout.shapes[0].x1) == (0, 6)
    np.testing.assert_allclose(fig.data[2].y, length_reward_curves(6, 6)["soft_overlong"])


def test_length_table_lists_countdown_lengths():
    lines = length_table().splitlines()
    assert len(lines) == 1 + 7 and lines[1].split()[0] == "4" and lines[-1].split()[0] == "10"
    assert lines[-1].split()[3] == "-1.000"
    assert lines[1].split()[1] == f"{0.5 + 0.25 * (1 + math.cos(0.4 * math.pi)):.3f}"


def test_arlcp_grid_is_arlcp_penalty():
    from workbench.rewards.arlcp import arlcp_penalty

    g = arlcp_grid(reflections=[0, 30, 45, 90], lengths=[100, 500, 900])
    assert g["penalty"].shape == (3, 4)
    assert np.all((g["penalty"] >= 0) & (g["penalty"] <= 0.2))
    # one cell by hand: the response (c = 45, L = 900) with the seven others in one group
    counts = torch.tensor([10, 20, 30, 40, 50, 60, 70, 45], dtype=torch.float64)
    lens = torch.tensor([200, 300, 400, 500, 600, 700, 800, 900], dtype=torch.float64)
    want = arlcp_penalty(counts, lens, torch.ones(8, dtype=torch.bool), torch.zeros(8, dtype=torch.long))[-1]
    assert g["penalty"][2, 2] == pytest.approx(float(want))
    w1, w2 = 0.10, 0.10  # c = 45 is in the 40 < c <= 80 bracket
    zc = (45 - counts.mean()) / (counts.std() + 1e-6)
    zl = (900 - lens.mean()) / (lens.std() + 1e-6)
    assert g["z_c"][2] == pytest.approx(float(zc)) and g["z_L"][2] == pytest.approx(float(zl))
    assert g["penalty"][2, 2] == pytest.approx(w1 / (1 + math.exp(-zc)) + w2 / (1 + math.exp(-zl)))
    assert np.all(np.diff(g["penalty"], axis=0) > 0)  # longer costs more at a fixed reflection count
    assert np.all(np.diff(g["z_c"]) > 0) and np.all(np.diff(g["z_L"]) > 0)


# ---------------------------------------------------------------------------------------------- hacking


def test_hacking_rewards_follow_the_recipes():
    d = hacking_rewards(HACK_GROUPS["a prompt it cannot solve"])
    lengths = d["lengths"]
    np.testing.assert_allclose(d["grpo"]["advantages"], 0.0)  # no right answer: no signal
    np.testing.assert_allclose(d["length-bias"]["rewards"], lengths / 10)
    order = np.argsort(d["length-bias"]["advantages"])
    assert list(lengths[order]) == sorted(lengths)  # the proxy ranks the answers by length
    flagged = d["flagged"]
    assert list(flagged) == list((lengths > 9) | d["truncated"])  # the recipe's length judge (9 of 10), the format one
    tight = hacking_rewards(HACK_GROUPS["a prompt it cannot solve"], cgpo_kw=cgpo_settings("length-bias-cgpo-tight"))
    assert list(tight["flagged"]) == list((lengths > 7.5) | d["truncated"])  # 3/4 of 10: the 8-token answer too
    assert np.all(d["length-bias-cgpo"]["rewards"][flagged] == -1.0)
    feasible = d["length-bias"]["rewards"][~flagged]
    mean = d["length-bias"]["rewards"].mean()  # CGPO's baseline: the group mean of the raw reward
    np.testing.assert_allclose(d["length-bias-cgpo"]["rewards"][~flagged], 1 / (1 + np.exp(-(feasible - mean))))
    assert d["length-bias-cgpo"]["advantages"][flagged].max() < d["length-bias-cgpo"]["advantages"][~flagged].min()
    assert d["metrics"]["cgpo/violation_rate"] == pytest.approx(flagged.mean())
    solved = hacking_rewards(HACK_GROUPS["a prompt it solves sometimes"])
    right = solved["correct"]
    assert solved["length-bias"]["advantages"][right].min() > solved["length-bias"]["advantages"][~right].max()


def test_hacking_figure_bars_are_the_advantages():
    fig = hacking_figure()
    assert len(fig.data) == 3 * len(HACK_GROUPS)
    d = hacking_rewards(HACK_GROUPS["a prompt it solves sometimes"])
    for trace, recipe in zip(fig.data[:3], ("grpo", "length-bias", "length-bias-cgpo")):
        assert trace.name == recipe
        np.testing.assert_allclose(trace.y, d[recipe]["advantages"])
    assert "⚑" in fig.data[0].x[3] and "cut" in fig.data[0].x[3] and "right" in fig.data[0].x[0]


# ---------------------------------------------------------------------------------------------- per-reward curves


ROWS = [{"step": s, "reward/mean": 0.1 * s, "rewards/task/mean": 0.2 + 0.1 * s, "rewards/task/std": 0.4,
         "rewards/soft-overlong/mean": -0.1 / (s + 1), "rewards/soft-overlong/std": 0.2,
         "rewards/unscorable_frac": 0.0, **({"rewards/cgpo/violation_rate": 0.1} if s else {})} for s in range(4)]


def test_reward_names_and_series():
    assert reward_names(ROWS) == ["task", "soft-overlong"]  # not unscorable_frac, nor a shaping's metric
    assert reward_names([{"step": 0, "rewards/x/mean": 1.0, "rewards/task/mean": 0.0}]) == ["task", "x"]
    s = per_reward_series(ROWS, "soft-overlong")
    np.testing.assert_allclose(s["mean"], [-0.1, -0.05, -0.1 / 3, -0.025])
    assert list(s["step"]) == [0, 1, 2, 3] and np.all(s["std"] == 0.2)
    spread = {r["reward"]: r for r in reward_spread(ROWS, {"soft-overlong": 2.0})}
    assert spread["task"]["weighted_std"] == pytest.approx(0.4)
    assert spread["soft-overlong"]["weighted_std"] == pytest.approx(0.4)
    assert spread["task"]["mean"] == pytest.approx(0.35)


def test_per_reward_figure_has_a_band_and_a_line_per_reward():
    fig = per_reward_figure(ROWS, title="t")
    assert len(fig.data) == 4
    band, line = fig.data[2], fig.data[3]
    np.testing.assert_allclose(line.y, per_reward_series(ROWS, "soft-overlong")["mean"])
    np.testing.assert_allclose(band.y[:4], np.minimum(line.y + 0.2, 0.0))  # a penalty is never positive
    np.testing.assert_allclose(band.y[4:], (line.y - 0.2)[::-1])
    assert [a.text for a in fig.layout.annotations] == ["rewards/task/mean ± std", "rewards/soft-overlong/mean ± std"]
    with pytest.raises(ValueError, match="no rewards"):
        per_reward_figure([{"step": 0, "reward/mean": 1.0}])


def test_per_reward_band_stays_inside_the_rewards_range():
    fig = per_reward_figure(ROWS)
    task_band, task_line = fig.data[0], fig.data[1]
    assert min(task_band.y) >= 0.0 and max(task_band.y) <= 1.0  # mean 0.2.. ± 0.4 would dip below 0
    np.testing.assert_allclose(task_band.y[4:], np.clip(task_line.y - 0.4, 0, 1)[::-1])
    assert "cut at the reward's possible values (task [0, 1]; soft-overlong ≤ 0)" in fig.layout.title.text
    # a range the logged means leave is not this run's: that band is left as it is
    wide = [{**r, "rewards/task/mean": 1.5 + r["rewards/task/mean"]} for r in ROWS]
    band, line = per_reward_figure(wide).data[:2]
    np.testing.assert_allclose(band.y[:4], np.asarray(line.y) + 0.4)
    plain = per_reward_figure(ROWS, ranges={})
    np.testing.assert_allclose(plain.data[0].y[4:], (np.asarray(plain.data[1].y) - 0.4)[::-1])
    assert "cut" not in plain.layout.title.text


# ---------------------------------------------------------------------------------------------- stored comparisons


def fake_store(path, name="f6-hacking"):
    """A small stored comparison in the format `stored_runs.data_lines` writes: 2 recipes x 2 seeds."""
    lines = [{"meta": {"name": name, "recipes": ["grpo", "length-bias"], "task": "countdown", "seeds": 2,
                       "sets": ["steps=10"], "command": f"python -m workbench.results.stored_runs {name}",
                       "commit": "abc", "machine": "test", "date": "today"}}]
    for recipe, grow in (("grpo", 0.0), ("length-bias", 0.2)):
        for seed in range(2):
            lines.append({"summary": {"recipe": recipe, "seed": seed, "accuracy_before": 0.3,
                                      "accuracy_after": 0.4 - grow + 0.02 * seed}})
            for step in (0, 5, 9):
                row = {"recipe": recipe, "seed": seed, "step": step, "accuracy": 0.3 - grow * step / 9,
                       "response_length/mean": 6.0 + grow * step + seed, "truncated_frac": grow * step / 9}
                if recipe == "length-bias":
                    row.update({"rewards/task/mean": 0.3, "rewards/length-bias/mean": 0.6 + 0.03 * step})
                lines.append({"row": row})
    (path / f"{name}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_stored_comparison_summary_and_figures(tmp_path):
    fake_store(tmp_path)
    meta, groups, summaries = load("f6-hacking", data_dir=tmp_path)
    rows = {r["recipe"]: r for r in stored_summary(groups, summaries, keys=("response_length/mean",
                                                                           "rewards/length-bias/mean"))}
    assert rows["grpo"]["response_length/mean"] == pytest.approx((6.5, 6.5))
    assert rows["length-bias"]["response_length/mean"] == pytest.approx((6.5, 6.5 + 1.8))
    assert rows["grpo"]["rewards/length-bias/mean"] == (None, None)
    assert rows["length-bias"]["rewards/length-bias/mean"] == pytest.approx((0.6, 0.87))
    assert rows["length-bias"]["accuracy_after"] == pytest.approx(0.21)
    assert rows["length-bias"]["accuracy_after_std"] == pytest.approx(np.std([0.2, 0.22], ddof=1))
    text = stored_summary_text(groups, summaries, keys=("rewards/length-bias/mean",)).splitlines()
    assert text[0].startswith("grpo") and "rewards/length-bias/mean – -> –" in text[0]
    assert "0.600 -> 0.870" in text[1] and "held-out accuracy 0.300 -> 0.210 ± 0.014" in text[1]
    # the notebook's picture: every recipe in the legend, GRPO absent from the proxy's panel
    fig = seed_band_curves(groups, keys=["accuracy", "rewards/length-bias/mean"])
    assert [t.name for t in fig.data if t.showlegend] == ["grpo", "length-bias"]
    proxy = [t for t in fig.data if t.name == "length-bias" and t.xaxis == "x2" and t.showlegend is not True]
    assert proxy and np.allclose(proxy[-1].y, [0.6, 0.75, 0.87])
    fig = seed_band_curves(groups, keys=["rewards/length-bias/mean", "accuracy"])  # a recipe without the first key
    assert [t.name for t in fig.data if t.showlegend] == ["grpo", "length-bias"]
    table = before_after_table(summaries, metrics=(("accuracy", "greedy accuracy"),)).data[0]
    assert list(table.header.values) == ["recipe", "seeds", "greedy accuracy"]
    assert table.cells.values[2][1] == f"0.300 → 0.210 ± {np.std([0.2, 0.22], ddof=1):.3f}"


# ---------------------------------------------------------------------------------------------- process rewards


def test_checklist_episode_kinds():
    d = checklist_episode()
    # items r0 (1776), r1 (1795, needs r0), answer; steps [37*40], [1776+19], [37*48], [1776+19], A:1795
    assert [it.id for it in d["items"]] == ["r0", "r1", "answer"]
    assert d["kind"].tolist() == [[2, 2, 3, 4, 4],   # backfilled, backfilled, pays, satisfied, satisfied
                                  [0, 0, 4, 4, 4],   # blocked (r0 not yet), then satisfied early: never pays
                                  [2, 2, 2, 2, 3]]   # the answer pays at the end, backfilled before
    assert d["reward"] == pytest.approx(2 / 3)
    clean = checklist_episode(actions=("[37*48]", "[1776+19]", "A:1795"))
    assert clean["reward"] == pytest.approx(1.0) and clean["paid"].sum() == 3
    fig = checklist_grid_figure()
    heat = fig.data[0]
    np.testing.assert_allclose(np.asarray(heat.z), d["kind"] + 0.5)
    assert heat.text[0][2] == "✓  r = 1" and heat.text[0][0] == "·  r̃ = 1" and heat.text[1][1] == "✓"
    assert [t.name for t in fig.data[1:]] == list(CELL_KINDS)
    assert "R = 0.667" in fig.layout.title.text
    noisy = checklist_episode(noise=0.5, seed=3)
    assert noisy["sat"].shape == (5, 3) and not np.array_equal(noisy["sat"], d["sat"])


def test_reflection_figure_data():
    fig = reflection_figure(max_reflections=10)
    np.testing.assert_allclose(np.asarray(fig.data[0].z), [[0.0, 1.0], [0.25, 0.75]])
    assert list(fig.data[1].y) == [0.0, 0.5]
    p = np.asarray(fig.data[2].y)
    assert p[0] == 0 and np.all(p[1:6] == 1.0) and np.all(p[6:] < 1)
    n = 7
    assert p[n] == pytest.approx(1 / (1 + 0.1 * (n - 3) ** 2) * math.exp(-0.05 * (n - 3))
                                 * (1 - 0.1 * math.sin(math.pi / 2 * (n - 3))))


def test_schedules():
    d = schedules(steps=100, spear_frac=0.5)
    assert d["spear"][0] == 1.0 and d["spear"][25] == pytest.approx(0.5) and d["spear"][50] == pytest.approx(0.0)
    assert np.all(d["spear"][51:] == 0.0)
    np.testing.assert_allclose(d["retro_exp"], np.exp(-5 * d["progress"]))
    assert d["retro_cutoff"][0] == 1.0 and d["retro_cutoff"][10] == pytest.approx(math.exp(-6.9))
    assert np.all(d["retro_cutoff"][11:] == 0.0)
    fig = schedules_figure()
    np.testing.assert_allclose(fig.data[0].y, d["spear"])


def test_ssl_tiers():
    d = ssl_tiers(distances=[0.0, 0.05, 0.06, 0.1, 0.11, 0.2, 0.21], progress=[0.0, 0.3, 0.5, 0.99, 1.0])
    assert list(d[("distance", 4)]) == [1.0, 0.6, 0.3, 0.3, 0.1, 0.1, 0.0]
    assert list(d[("distance", 1)]) == [1.0, 0, 0, 0, 0, 0, 0]
    assert list(d[("progress", 4)]) == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert list(d[("progress", 1)]) == [0, 0, 0, 0, 1.0]
    fig = ssl_figure()
    assert len(fig.data) == 8 and fig.data[0].line.shape == "hv"


def test_fapo_rows_and_figure():
    rows = fapo_rows()
    assert [r["reward"] for r in rows] == [1.0, 0.0, -1.0]
    assert [r["flaw"] for r in rows] == [-1, 0, None]
    fig = fapo_figure()
    assert list(fig.data[0].y) == [1.0, 0.0, -1.0] and "first wrong step 0" in fig.data[0].x[1]


def test_family_recipes():
    keys = family_recipes()
    catalog = registry.catalog()
    recipes = {e.key for e in registry.entries("recipe")}
    f6 = {k for k, v in catalog.items() if v.get("family") == "rewards" and k in recipes}
    assert f6 <= set(keys) and {"length-bias", "length-bias-cgpo", "soft-overlong"} <= set(keys)
    assert len(keys) == len(set(keys)) and set(keys) <= recipes


def test_per_reward_ranges_that_are_not_a_range_are_refused():
    for bad in ({"task": (1.0, 0.0)}, {"task": 1.0}, {"task": (0.0,)}):
        with pytest.raises(ValueError, match="give \\(lowest, highest\\)"):
            per_reward_figure(ROWS, ranges=bad)
