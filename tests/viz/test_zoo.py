"""The clipping zoo, advantage-estimator and glossary figures (workbench.viz.zoo). Fast: no model, only the
registered math."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from workbench import registry
from workbench.batch import RolloutBatch
from workbench.viz.zoo import (advantage_comparison, advantage_table_html, advantage_token_heatmaps,
                               advantage_vs_success_rate, clip_fraction_figure, extra_inputs, glossary_html,
                               gradient_weight_figure, gradient_weight_grid, gradient_weight_slices,
                               gradient_weight_surface, metric_panels, policy_objectives, staleness_figure,
                               success_rate_advantages)


# No point on a clip edge (0.8, 1.2, 1.28) or a dual-clip cap (2, 3): a max()/clamp tie splits the gradient.
RATIOS = np.round(np.arange(0.05, 4.0, 0.1), 6)
ADVANTAGES = np.array([-2.0, -1.0, -0.3, 0.0, 0.3, 1.0, 2.0])
POLICY_KEYS = [e.key for e in policy_objectives()]


def ppo_weight(r, A, eps_low, eps_high, dual_c=None):
    """d(-l)/d(log pi) of PPO-clip: A r on the unclipped side, 0 where the clipped branch (or the cap) is active."""
    clipped = ((A > 0) & (r > 1 + eps_high)) | ((A < 0) & (r < 1 - eps_low))
    if dual_c is not None:
        clipped |= (A < 0) & (r > dual_c)
    return np.where(clipped, 0.0, A * r)


def grid():
    A, R = np.meshgrid(ADVANTAGES, RATIOS, indexing="ij")
    return R, A


@pytest.mark.covers("ppo-clip")
@pytest.mark.parametrize("hp", [{}, {"eps_low": 0.2, "eps_high": 0.28}, {"eps_low": 0.1, "eps_high": 0.3,
                                                                          "dual_clip_c": 2.5}])
def test_ppo_clip_surface_is_the_analytical_weight(hp):
    w = gradient_weight_surface("ppo-clip", RATIOS, ADVANTAGES, **hp)
    R, A = grid()
    assert w.shape == (len(ADVANTAGES), len(RATIOS))
    expected = ppo_weight(R, A, hp.get("eps_low", 0.2), hp.get("eps_high", 0.2), hp.get("dual_clip_c"))
    np.testing.assert_allclose(w, expected, atol=1e-12)
    assert np.all(w[(A > 0) & (R > 1 + hp.get("eps_high", 0.2))] == 0)  # exactly zero, not small


@pytest.mark.covers("dual-clip", "tis")
def test_dual_clip_and_tis_without_mismatch():
    R, A = grid()
    np.testing.assert_allclose(gradient_weight_surface("dual-clip", RATIOS, ADVANTAGES),
                               ppo_weight(R, A, 0.2, 0.2, 3.0), atol=1e-12)
    # tis needs mu_logp: the zoo passes old_logp (weight 1), which is exactly PPO-clip
    np.testing.assert_allclose(gradient_weight_surface("tis", RATIOS, ADVANTAGES), ppo_weight(R, A, 0.2, 0.2),
                               atol=1e-12)


@pytest.mark.covers("sapo")
@pytest.mark.parametrize("hp", [{}, {"tau_pos": 0.3, "tau_neg": 4.0}])
def test_sapo_surface_is_a_r_4_sigma_one_minus_sigma(hp):
    w = gradient_weight_surface("sapo", RATIOS, ADVANTAGES, **hp)
    R, A = grid()
    tau = np.where(A > 0, hp.get("tau_pos", 1.0), hp.get("tau_neg", 1.05))
    s = 1 / (1 + np.exp(-tau * (R - 1)))
    np.testing.assert_allclose(w, A * R * 4 * s * (1 - s), atol=1e-12)


@pytest.mark.covers("cispo", "gspo", "geo_mean")
def test_cispo_saturates_and_sequence_objectives_reduce_to_one_token():
    R, A = grid()
    np.testing.assert_allclose(gradient_weight_surface("cispo", RATIOS, ADVANTAGES),
                               A * np.minimum(R, 5.0), atol=1e-12)
    # one token per sequence: the sequence ratio is the token ratio, so gspo is PPO-clip with its own eps
    np.testing.assert_allclose(gradient_weight_surface("gspo", RATIOS, ADVANTAGES),
                               ppo_weight(R, A, 3e-4, 4e-4), atol=1e-12)
    lo, hi = np.exp(-0.4), np.exp(0.4)  # GMPO clips log r to [-0.4, 0.4] in the advantage's direction
    expected = np.where(((A > 0) & (R > hi)) | ((A < 0) & (R < lo)), 0.0, A * R)
    np.testing.assert_allclose(gradient_weight_surface("geo_mean", RATIOS, ADVANTAGES), expected, atol=1e-12)


def test_policy_objectives_skip_value_loss_and_fill_mu_logp():
    keys = {e.key for e in policy_objectives()}
    assert {"ppo-clip", "sapo", "cispo", "gspo", "tis"} <= keys and "value-loss" not in keys
    with pytest.raises(KeyError, match="no objective named 'value-loss'"):
        gradient_weight_surface("value-loss")  # the critic's loss is a `value` component
    old = torch.zeros(2, 1)
    assert set(extra_inputs(registry.get("objective", "tis").fn, old)) == {"mu_logp"}
    assert extra_inputs(registry.get("objective", "ppo-clip").fn, old) == {}


def test_grid_has_a_panel_for_every_policy_objective():
    fig = gradient_weight_grid(ratios=RATIOS, advantages=ADVANTAGES)
    heatmaps = [t for t in fig.data if t.type == "heatmap" and t.name not in (None, "zero gradient")]
    assert [t.name for t in heatmaps] == POLICY_KEYS  # every objective drew (no error panel)
    titles = [a.text for a in fig.layout.annotations]
    assert titles == POLICY_KEYS
    i = next(i for i, t in enumerate(fig.data) if t.name == "ppo-clip")
    overlay = fig.data[i + 1]  # each heatmap is followed by its zero-gradient overlay
    R, A = grid()
    np.testing.assert_array_equal(np.asarray(overlay.z), ((ppo_weight(R, A, 0.2, 0.2) == 0) & (A != 0)).astype(int))


def test_grid_shows_a_failing_panel_instead_of_raising():
    fig = gradient_weight_grid(["ppo-clip", ("cispo", {"cap_abs": 0.5})], ratios=RATIOS, advantages=ADVANTAGES)
    assert [t.name for t in fig.data if t.name != "zero gradient"] == ["ppo-clip"]
    assert any("cap_abs" in (a.text or "") and "ValueError" in a.text for a in fig.layout.annotations)


@pytest.mark.parametrize("key", POLICY_KEYS)
def test_gradient_weight_figure_for_every_objective(key):
    fig = gradient_weight_figure(key, ratios=RATIOS, advantages=ADVANTAGES)
    assert len(fig.data) == 4 and key in fig.layout.title.text
    plus = next(t for t in fig.data if t.name == "A = +1")
    # the same one-call batch as the figure's slices (objectives may select tokens by a batch statistic)
    np.testing.assert_allclose(plus.y, gradient_weight_surface(key, RATIOS, [1.0, -1.0])[0], atol=1e-12)


def test_slices_merge_identical_curves_and_name_every_objective():
    fig = gradient_weight_slices(ratios=RATIOS)
    names = [t.name for t in fig.data if t.showlegend]
    assert sorted(k for n in names for k in n.split(" = ")) == sorted(POLICY_KEYS)
    assert any("ppo-clip" in n and "tis" in n for n in names)  # identical per-token rule, one line


def test_zoo_explorer_switches_objective_and_sliders():
    pytest.importorskip("ipywidgets")
    from workbench.viz.zoo import zoo_explorer

    box = zoo_explorer("ppo-clip")
    c = box.controls
    assert c["tau_pos"].disabled and not c["eps_high"].disabled
    c["eps_high"].value = 0.5
    plus = lambda: np.asarray(box.figure.data[2].y, dtype=float)  # noqa: E731 (slice at A = +1)
    x = np.asarray(box.figure.data[2].x, dtype=float)
    assert np.all(plus()[(x > 1.25) & (x < 1.45)] > 0)
    c["objective"].value = "sapo"
    assert not c["tau_pos"].disabled and c["eps_low"].disabled and c["tau_pos"].value == pytest.approx(1.0)
    assert box.figure.layout.title.text.startswith("sapo")
    c["objective"].value = "dual-clip"
    assert c["dual_clip_c"].value == 3.0 and "dual_clip_c=3" in box.figure.layout.title.text
    c["objective"].value = "cispo"  # eps sliders off (cap_abs convention), CISPO's cap on
    assert c["eps_low"].disabled and not c["cap_abs"].disabled and c["cap_abs"].value == 5.0


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
    batch.turn = torch.where(batch.mask > 0, 0, -1).long()        # one-turn episodes (RLVMR's step advantage)
    batch.turn_info = [[{"action": "A:1", "tool_error": None, "state": int(g)}] for g in batch.group]
    return batch


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_advantage_figures_for_every_estimator():
    batch = estimator_batch()
    one_turn = [e for e in registry.entries("advantage") if e.family != "credit"]  # F4's: notebook 13
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


def test_metric_panels_and_glossary_table():
    rows = [{"step": s, "reward/mean": 0.1 * s, "eval/accuracy": 0.5 if s == 2 else None} for s in range(3)]
    fig = metric_panels(rows, [("reward/mean", "what it is\nHealthy: up"), ("eval/accuracy", "greedy"),
                               ("kl", "not here")], title="t")
    assert [list(t.x) for t in fig.data] == [[0, 1, 2], [2], []]
    texts = [a.text for a in fig.layout.annotations]
    assert "<b>reward/mean</b><br>what it is<br>Healthy: up" == texts[0] and "not logged" in texts[2]
    html_table = glossary_html([("kl", "a < b", "flat", True), ("x", "y", "z", False)])
    assert "a &lt; b" in html_table and html_table.count("<tr>") == 3


def test_long_keys_break_after_their_last_separator_in_panel_titles():
    from workbench.viz.zoo import panel_title

    assert panel_title("reinforce_plus_plus_baseline") == "reinforce_plus_plus_<br>baseline"
    assert panel_title("aepo-agentic-clip") == "aepo-agentic-clip" and panel_title("x" * 30) == "x" * 30
