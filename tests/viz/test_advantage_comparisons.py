"""Advantage estimators side by side: every bar, cell and curve is the registered estimator's own advantage, and the
success-rate curves are the closed forms of GRPO's |A| and GUI-Libra's scale."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from workbench import registry
from workbench.advantages.group import grpo, rloo
from workbench.batch import RolloutBatch
from workbench.viz.advantage_comparisons import (advantage_bars, advantage_comparison, advantage_table_html,
                                                 advantage_token_heatmaps, advantage_vs_success_rate, panel_title,
                                                 success_rate_advantages, success_scale_figure)


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


def estimator_batch():
    batch = RolloutBatch.from_rewards([1, 0, 0, 1, 1, 1, 1, 1], [0, 0, 0, 0, 1, 1, 1, 1], [3, 1, 2, 4, 2, 2, 3, 1])
    batch.values = torch.zeros_like(batch.mask)
    batch.baseline_rewards = torch.tensor([1.0] * 4 + [0.0] * 4, dtype=torch.float64)
    batch.truncated = torch.zeros(batch.size, dtype=torch.bool)  # T-PPO: every response finished
    # chain entries read what earlier stages give: the previous advantage, the sampling forward pass, ...
    batch.advantages = registry.get("advantage", "grpo").fn(batch)
    batch.scores, batch.old_logp, batch.entropy = batch.rewards.clone(), -0.5 * batch.mask, 0.7 * batch.mask
    batch.temp_logp = -0.6 * batch.mask  # DCPO's log-probs at another temperature
    batch.resampled = torch.zeros(batch.size, dtype=torch.bool)  # AEPO: no re-sampled rows
    batch.offpolicy_mask = torch.zeros_like(batch.mask)            # RL-PLUS, AMPO: no external / teacher rows
    batch.parent = torch.full((batch.size,), -1)                # ARPO: every row a root, nothing branched
    batch.branch_turn = torch.zeros(batch.size, dtype=torch.long)
    batch.turn = torch.where(batch.mask > 0, 0, -1).long()        # one-turn episodes (RLVMR's step advantage)
    batch.turn_info = [[{"action": "A:1", "tool_error": None, "state": int(g)}] for g in batch.group]
    return batch


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_advantage_figures_for_every_estimator():
    batch = estimator_batch()
    one_turn = [e for e in registry.entries("advantage") if e.family not in ("credit", "multiagent")]  # 13's, 16's
    results = {e.key: e.fn(batch) for e in one_turn}
    results["needs-more"] = "ValueError: this component needs batch fields ['x'], which are None"
    fig = advantage_comparison(results, batch)
    bars = {t.name: np.asarray(t.y, dtype=float) for t in fig.data}
    assert set(bars) == {e.key for e in one_turn}
    np.testing.assert_allclose(bars["rloo"], results["rloo"][:, 0].numpy(), atol=1e-12)
    assert "needs-more" in fig.layout.annotations[0].text
    table = advantage_table_html(results, batch)
    assert table.count("<tr>") == len(results) + 1 and "needs batch fields" in table
    assert "+0.667" in table  # rloo of a right answer in a 2-of-4 group: 1 - 1/3
    heat = advantage_token_heatmaps(results, batch)
    assert len(heat.data) == len(results) - 1


def test_long_keys_break_after_their_last_separator_in_panel_titles():
    assert panel_title("reinforce_plus_plus_baseline") == "reinforce_plus_plus_<br>baseline"
    assert panel_title("aepo-agentic-clip") == "aepo-agentic-clip" and panel_title("x" * 30) == "x" * 30


def test_advantage_vs_success_rate_matches_closed_forms():
    G = 8
    data = success_rate_advantages(G)
    p = data["p"][1:G]
    np.testing.assert_allclose(data["none (Dr.GRPO)"]["correct"][1:G], 1 - p, atol=1e-12)
    np.testing.assert_allclose(data["none (Dr.GRPO)"]["wrong"][1:G], p, atol=1e-12)
    population = np.sqrt((1 - p) / p)
    np.testing.assert_allclose(data["group std, population"]["correct"][1:G], population, rtol=1e-5)
    np.testing.assert_allclose(data["group std, Bessel"]["correct"][1:G], population * np.sqrt((G - 1) / G),
                               rtol=1e-5)
    assert np.isnan(data["group std, Bessel"]["correct"][0]) and np.isnan(data["none (Dr.GRPO)"]["wrong"][G])
    fig = advantage_vs_success_rate(G)
    assert len(fig.data) == 2 * (len(data) - 1)


@pytest.mark.covers("gui-libra")
def test_success_scale_figure_follows_the_component():
    fig = success_scale_figure(G=4)
    gui = fig.data[0]
    np.testing.assert_allclose(gui.x, [0, 0.25, 0.5, 0.75, 1.0])
    np.testing.assert_allclose(gui.y, [0.5, 0.875, 1.0, 1.0, 1.0])  # clip(0.5 + 1.5 p, 0, 1)
    np.testing.assert_allclose(fig.data[2].y, [1.0] * 5)  # base 1, coef 0: plain GRPO
