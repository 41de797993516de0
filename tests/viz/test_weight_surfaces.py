"""The per-token gradient weight over (r, A): every drawable surface is the objective's own autograd weight (the
clipping zoo's against closed forms on a dense grid, F2's cell by cell), the grid's inputs mean what their knobs say,
and the figures and grids draw exactly that surface. Fast: no model, only the registered math."""
from __future__ import annotations

import inspect
import math

import numpy as np
import pytest
import torch

from workbench import ops, registry
from workbench.viz.weight_surfaces import (F2, FAMILIES, GRID_HELD, KNOBS, NotDrawable, drawable_keys,
                                           family_objectives, gradient_weight_figure, gradient_weight_grid,
                                           gradient_weight_slices, gradient_weight_surface, grid_batch, grid_hp,
                                           grid_note, knob_defaults, knob_names, not_drawable, panel_spec,
                                           policy_objectives, surface_figure, surface_grid, weight_heatmaps)

# Cell-by-cell grid: no point on a band edge (0.8, 1.2, 1.28, VSPO's 1 -+ 0.136, HAPO's 1.265) or a cap (2, 3, 10): a
# tie splits the gradient between branches.
# No point on a band edge (0.8, 1.2, 1.28, VSPO's 1 -+ 0.136, HAPO's 1.265) or a cap (2, 3, 10): a tie splits the
# gradient between branches.
RATIOS = np.array([0.3, 0.75, 0.9, 1.1, 1.25, 1.5, 2.5, 3.5])
ADVANTAGES = np.array([-1.0, -0.3, 0.0, 0.4, 1.0])
# Dense grid: no point on a clip edge (0.8, 1.2, 1.28) or a dual-clip cap (2, 3): a max()/clamp tie splits the gradient.
DENSE_RATIOS = np.round(np.arange(0.05, 4.0, 0.1), 6)
DENSE_ADVANTAGES = np.array([-2.0, -1.0, -0.3, 0.0, 0.3, 1.0, 2.0])
KEYS = drawable_keys()
POLICY_KEYS = [e.key for e in policy_objectives()]
UNIT = ops.Denominators(num_tokens=1.0, num_seqs=1.0, norm_constant=1.0)  # aggregated loss = sum of token losses
ALTERNATIVE = {"old_over_mu": 1.6, "entropy": 0.05, "target_from_A": False, "target_adv": -0.7, "off_policy": True,
               "p_old": 0.3, "task_value": 0.0}


def grid(ratios=RATIOS, advantages=ADVANTAGES):
    A, R = np.meshgrid(advantages, ratios, indexing="ij")
    return R, A


def ppo_weight(r, A, eps_low, eps_high, dual_c=None):
    """d(-l)/d(log pi) of PPO-clip: A r on the unclipped side, 0 where the clipped branch (or the cap) is active."""
    clipped = ((A > 0) & (r > 1 + eps_high)) | ((A < 0) & (r < 1 - eps_low))
    if dual_c is not None:
        clipped |= (A < 0) & (r > dual_c)
    return np.where(clipped, 0.0, A * r)


def cellwise(key, inputs=None, **hp):
    """The objective's own autograd weight, one cell per call: a batch of that ONE token (plus, for an objective
    reading the entropy, the 99 tokens around it, r = 1 and A = 0), each input built from the knobs' documented
    meaning, independently of `grid_batch`."""
    entry = registry.get("objective", key)
    knobs = {**knob_defaults(key), **(inputs or {})}
    reads = set(knob_names(key))
    out = np.zeros((len(ADVANTAGES), len(RATIOS)))
    f64 = dict(dtype=torch.float64)
    background = torch.logspace(math.log10(0.01), math.log10(2.0), 99, **f64) if "entropy" in reads else None
    rows = 1 + (0 if background is None else 99)
    for i, a in enumerate(ADVANTAGES):
        for j, r in enumerate(RATIOS):
            old = torch.full((rows, 1), math.log(knobs.get("p_old", 1.0)), **f64)
            if background is not None:
                old[1:] = 0.0
            leaf = torch.tensor([[float(old[0, 0]) + math.log(r)]], **f64, requires_grad=True)
            logp = torch.cat([leaf, old[1:]])
            adv = torch.zeros(rows, 1, **f64)
            adv[0] = a
            kw = {}
            if "old_over_mu" in reads:
                kw["mu_logp"] = old - math.log(knobs["old_over_mu"])
            if background is not None:
                kw["entropy"] = torch.cat([torch.tensor([knobs["entropy"]], **f64), background])[:, None]
            if "target_adv" in reads:
                kw["target_adv"] = adv.clone() if knobs["target_from_A"] else torch.full_like(adv, knobs["target_adv"])
            if "off_policy" in reads:
                kw["offpolicy_mask"] = torch.full_like(adv, float(knobs["off_policy"]))
            if "task_value" in reads:
                kw["task_value"] = torch.full((rows,), knobs["task_value"], **f64)
            loss, _ = entry.fn(logp, old, adv, torch.ones_like(adv), agg=entry.defaults["agg"], denom=UNIT,
                               **kw, **grid_hp(key, hp))
            (grad,) = torch.autograd.grad(-loss, leaf, allow_unused=True)
            out[i, j] = 0.0 if grad is None else float(grad)
    return out


def alternative(key):
    return {k: ALTERNATIVE[k] for k in knob_names(key)}


# ----------------------------------------------------------------------------------------------------
# The clipping zoo's objectives against their closed forms


@pytest.mark.covers("ppo-clip")
@pytest.mark.parametrize("hp", [{}, {"eps_low": 0.2, "eps_high": 0.28}, {"eps_low": 0.1, "eps_high": 0.3,
                                                                          "dual_clip_c": 2.5}])
def test_ppo_clip_surface_is_the_analytical_weight(hp):
    w = gradient_weight_surface("ppo-clip", DENSE_RATIOS, DENSE_ADVANTAGES, **hp)
    R, A = grid(DENSE_RATIOS, DENSE_ADVANTAGES)
    assert w.shape == (len(DENSE_ADVANTAGES), len(DENSE_RATIOS))
    expected = ppo_weight(R, A, hp.get("eps_low", 0.2), hp.get("eps_high", 0.2), hp.get("dual_clip_c"))
    np.testing.assert_allclose(w, expected, atol=1e-12)
    assert np.all(w[(A > 0) & (R > 1 + hp.get("eps_high", 0.2))] == 0)  # exactly zero, not small


@pytest.mark.covers("dual-clip", "tis")
def test_dual_clip_and_tis_without_mismatch():
    R, A = grid(DENSE_RATIOS, DENSE_ADVANTAGES)
    np.testing.assert_allclose(gradient_weight_surface("dual-clip", DENSE_RATIOS, DENSE_ADVANTAGES),
                               ppo_weight(R, A, 0.2, 0.2, 3.0), atol=1e-12)
    # tis needs mu_logp: the zoo passes old_logp (weight 1), which is exactly PPO-clip
    np.testing.assert_allclose(gradient_weight_surface("tis", DENSE_RATIOS, DENSE_ADVANTAGES),
                               ppo_weight(R, A, 0.2, 0.2), atol=1e-12)


@pytest.mark.covers("sapo")
@pytest.mark.parametrize("hp", [{}, {"tau_pos": 0.3, "tau_neg": 4.0}])
def test_sapo_surface_is_a_r_4_sigma_one_minus_sigma(hp):
    w = gradient_weight_surface("sapo", DENSE_RATIOS, DENSE_ADVANTAGES, **hp)
    R, A = grid(DENSE_RATIOS, DENSE_ADVANTAGES)
    tau = np.where(A > 0, hp.get("tau_pos", 1.0), hp.get("tau_neg", 1.05))
    s = 1 / (1 + np.exp(-tau * (R - 1)))
    np.testing.assert_allclose(w, A * R * 4 * s * (1 - s), atol=1e-12)


@pytest.mark.covers("cispo", "gspo", "geo_mean")
def test_cispo_saturates_and_sequence_objectives_reduce_to_one_token():
    R, A = grid(DENSE_RATIOS, DENSE_ADVANTAGES)
    np.testing.assert_allclose(gradient_weight_surface("cispo", DENSE_RATIOS, DENSE_ADVANTAGES),
                               A * np.minimum(R, 5.0), atol=1e-12)
    # one token per sequence: the sequence ratio is the token ratio, so gspo is PPO-clip with its own eps
    np.testing.assert_allclose(gradient_weight_surface("gspo", DENSE_RATIOS, DENSE_ADVANTAGES),
                               ppo_weight(R, A, 3e-4, 4e-4), atol=1e-12)
    lo, hi = np.exp(-0.4), np.exp(0.4)  # GMPO clips log r to [-0.4, 0.4] in the advantage's direction
    expected = np.where(((A > 0) & (R > hi)) | ((A < 0) & (R < lo)), 0.0, A * R)
    np.testing.assert_allclose(gradient_weight_surface("geo_mean", DENSE_RATIOS, DENSE_ADVANTAGES), expected,
                               atol=1e-12)


def test_policy_objectives_skip_value_loss_and_fill_mu_logp():
    keys = {e.key for e in policy_objectives()}
    assert {"ppo-clip", "sapo", "cispo", "gspo", "tis"} <= keys and "value-loss" not in keys
    with pytest.raises(KeyError, match="no objective named 'value-loss'"):
        gradient_weight_surface("value-loss")  # the critic's loss is a `value` component
    # tis reads the engine's log-probs: at the default pi_old / mu = 1 the grid gives it old_logp (no mismatch)
    g = grid_batch("tis", [0.5, 2.0], [1.0])
    assert knob_names("tis") == ["old_over_mu"] and torch.equal(g["kw"]["mu_logp"], g["old_logp"])
    assert grid_batch("ppo-clip", [0.5, 2.0], [1.0])["kw"] == {}


@pytest.mark.parametrize("key", POLICY_KEYS)
def test_the_zoo_surface_is_one_call_of_the_objective_on_the_whole_grid(key):
    """What the clipping zoo's grid needs of the surface it shares with F2's: every zoo objective at its defaults,
    called ONCE on a batch of one-token rows (logp = log r, old_logp = 0, every *_logp input = old_logp: no
    mismatch) so that objectives selecting tokens by a batch statistic (kl_cov's top-k) see the whole grid."""
    entry = registry.get("objective", key)
    R, A = grid(DENSE_RATIOS, DENSE_ADVANTAGES)
    logp = torch.tensor(np.log(R).reshape(-1, 1), dtype=torch.float64, requires_grad=True)
    old = torch.zeros_like(logp)
    kw = {name: old for name, p in inspect.signature(entry.fn).parameters.items()  # tis's, minirl's mu_logp
          if p.kind is p.KEYWORD_ONLY and p.default is p.empty}
    loss, _ = entry.fn(logp, old, torch.tensor(A.reshape(-1, 1)), torch.ones_like(logp), agg=entry.defaults["agg"],
                       denom=UNIT, **kw)
    (grad,) = torch.autograd.grad(-loss, logp, allow_unused=True)
    expected = np.zeros_like(R) if grad is None else grad.numpy().reshape(R.shape)
    np.testing.assert_array_equal(gradient_weight_surface(key, DENSE_RATIOS, DENSE_ADVANTAGES), expected)


# ----------------------------------------------------------------------------------------------------
# F1 and F2 objectives cell by cell, and what each input does


@pytest.mark.covers("bapo", "gbpo", "dispo", "hispo", "vspo", "r2vpo", "hapo", "policy-shaping", "aepo-agentic-clip",
                    "dots-rr-clip")
@pytest.mark.parametrize("key, setting", [(k, "defaults") for k in KEYS] + [(k, "alternative") for k in KEYS
                                                                            if knob_names(k)])
def test_surface_is_the_objectives_own_autograd_weight_cell_by_cell(key, setting):
    inputs = alternative(key) if setting == "alternative" else {}
    w = gradient_weight_surface(key, RATIOS, ADVANTAGES, inputs)
    assert w.shape == (len(ADVANTAGES), len(RATIOS))
    expected = cellwise(key, inputs)
    R, _ = grid()
    impossible = R * {**knob_defaults(key), **inputs}.get("p_old", 1.0) > 1 if "off_policy" in knob_names(key) \
        else np.zeros_like(R, bool)
    assert np.array_equal(np.isnan(w), impossible & bool({**knob_defaults(key), **inputs}.get("off_policy", False)))
    np.testing.assert_allclose(w[~np.isnan(w)], expected[~np.isnan(w)], atol=1e-10)


def test_drawable_keys_cover_f1_and_f2_objectives_and_capo_is_listed_with_its_reason():
    objectives = {e.key for e in family_objectives(FAMILIES)}
    assert set(KEYS) | {"capo"} == objectives
    assert {"ppo-clip", "cispo", "sapo", "bapo", "gbpo", "hapo", "policy-shaping", "r2vpo"} <= set(KEYS)
    assert not {"clip_cov", "kl_cov"} & set(KEYS)  # F3
    missing = not_drawable()
    assert "LM head" in missing["capo"] and "optimizer" in missing["capo"]
    # F2 methods without a policy objective are named too, with the loss their recipe draws
    assert "advantage" in missing["gui-libra"] and "ppo-clip" in missing["gui-libra"]
    assert "regularizer" in missing["safe-kl-control"]
    assert set(not_drawable(FAMILIES, methods=False)) == {"capo"}
    with pytest.raises(NotDrawable, match="LM head"):
        gradient_weight_surface("capo")


@pytest.mark.covers("bapo")
@pytest.mark.parametrize("hp, lo, hi", [({}, 0.6, 1.2), ({"c_low": 0.7, "c_high": 1.6}, 0.7, 1.6)])
def test_bapo_surface_is_dual_clip_ppo_at_its_held_bounds(hp, lo, hi):
    R, A = grid()
    np.testing.assert_allclose(gradient_weight_surface("bapo", RATIOS, ADVANTAGES, **hp),
                               ppo_weight(R, A, 1 - lo, hi - 1, 3.0),
                               atol=1e-12)
    assert GRID_HELD["bapo"][0]["step_low"] == 0 and "bounds held" in grid_note("bapo", **hp)


@pytest.mark.covers("gbpo")
@pytest.mark.parametrize("inputs", [{}, {"target_from_A": False, "target_adv": -0.7}])
def test_gbpo_surface_pulls_the_ratio_to_its_target_from_either_side(inputs):
    R, A = grid()
    target = A if inputs.get("target_from_A", True) else np.full_like(A, inputs["target_adv"])
    rho = 0.8 + 0.4 / (1 + np.exp(-target))
    np.testing.assert_allclose(gradient_weight_surface("gbpo", RATIOS, ADVANTAGES, inputs),
                               np.abs(A) * R * np.sign(rho - R), atol=1e-12)


@pytest.mark.covers("dispo")
def test_dispo_surface_masks_both_sides_per_class():
    R, A = grid()
    inside = (R >= 0.8) & (R <= 1.28)
    np.testing.assert_allclose(gradient_weight_surface("dispo", RATIOS, ADVANTAGES), np.where(inside, A * R, 0.0),
                               atol=1e-12)
    w = gradient_weight_surface("dispo", RATIOS, ADVANTAGES, eps_high_neg=0.6, eps_low_pos=0.8)  # the classes differ
    inside = np.where(A > 0, (R >= 0.2) & (R <= 1.28), (R >= 0.8) & (R <= 1.6))
    np.testing.assert_allclose(w, np.where(inside, A * R, 0.0), atol=1e-12)


@pytest.mark.covers("dots-rr-clip", "r2vpo", "hispo")
@pytest.mark.parametrize("w_mu", [1.0, 1.6, 3.0])
def test_behaviour_weight_objectives_follow_pi_old_over_mu(w_mu):
    R, A = grid()
    inputs = {"old_over_mu": w_mu}
    np.testing.assert_allclose(gradient_weight_surface("dots-rr-clip", RATIOS, ADVANTAGES, inputs),
                               w_mu * ppo_weight(R, A, 0.2, 0.2), atol=1e-12)
    for lam in (1.0, 0.25):
        np.testing.assert_allclose(gradient_weight_surface("r2vpo", RATIOS, ADVANTAGES, inputs, lam=lam),
                                   min(w_mu, 2.0) * (A * R - 2 * lam * (R - 1) * R), atol=1e-12)
    kept = (R * w_mu >= 0.8) & (R * w_mu <= 1.28) & (abs(math.log(w_mu)) <= math.log(2))
    np.testing.assert_allclose(gradient_weight_surface("hispo", RATIOS, ADVANTAGES, inputs),
                               np.where(kept, ppo_weight(R, A, 0.2, 0.28), 0.0), atol=1e-12)


@pytest.mark.covers("policy-shaping")
@pytest.mark.parametrize("p_old", [0.1, 0.5])
def test_policy_shaping_surface_reads_the_probability_and_blanks_impossible_cells(p_old):
    R, A = grid()
    p = R * p_old
    w = gradient_weight_surface("policy-shaping", RATIOS, ADVANTAGES, {"p_old": p_old})
    expected = np.where(p > 1, np.nan, A * 0.1 * p / (p + 0.1) ** 2)
    np.testing.assert_allclose(w, expected, atol=1e-12)  # NaN where p > 1, in the same cells
    np.testing.assert_allclose(gradient_weight_surface("policy-shaping", RATIOS, ADVANTAGES, {"off_policy": False}),
                               ppo_weight(R, A, 0.2, 0.2), atol=1e-12)


@pytest.mark.covers("vspo")
@pytest.mark.parametrize("v", [0.0, 0.09, 0.25])
def test_vspo_surface_narrows_the_band_with_the_task_value(v):
    R, A = grid()
    s = 1 - 0.5 + 0.5 * v / 0.25
    np.testing.assert_allclose(gradient_weight_surface("vspo", RATIOS, ADVANTAGES, {"task_value": v}),
                               ppo_weight(R, A, 0.2 * s, 0.2 * s), atol=1e-12)


@pytest.mark.covers("aepo-agentic-clip", "hapo")
def test_entropy_objectives_read_the_tokens_entropy_within_a_fixed_batch():
    R, A = grid()
    ppo = ppo_weight(R, A, 0.2, 0.2)
    high = gradient_weight_surface("aepo-agentic-clip", RATIOS, ADVANTAGES, {"entropy": 1.5})
    np.testing.assert_allclose(high, np.where((A > 0) & (R > 1.2), 1.2 * A, ppo), atol=1e-12)  # gradient kept
    np.testing.assert_allclose(gradient_weight_surface("aepo-agentic-clip", RATIOS, ADVANTAGES, {"entropy": 0.05}), ppo,
                               atol=1e-12)
    assert "not in the top" in grid_note("aepo-agentic-clip", {"entropy": 0.05})
    # hapo without redistribution and adaptive bounds is dual-clip PPO with c = 10, whatever the entropy
    np.testing.assert_allclose(gradient_weight_surface("hapo", RATIOS, ADVANTAGES, {"entropy": 2.5}, clip_alpha=0.0,
                                              adv_beta=0.0), ppo_weight(R, A, 0.2, 0.2, 10.0), atol=1e-12)
    # the batch statistics do not depend on the grid's size: n copies of one 100-token batch
    from workbench.objectives.hapo import entropy_stats

    small, large = grid_batch("hapo", [1.0], [1.0]), grid_batch("hapo", RATIOS, ADVANTAGES)
    assert small["kw"]["entropy"].shape[0] == 100 and large["kw"]["entropy"].shape[0] == 100 * RATIOS.size * 5
    a, b = (entropy_stats(g["kw"]["entropy"], g["mask"]) for g in (small, large))
    assert a.pivot == pytest.approx(b.pivot, abs=1e-12) and a.std == pytest.approx(b.std, abs=1e-12)
    assert (a.pos_max, a.neg_min) == pytest.approx((b.pos_max, b.neg_min), abs=1e-12)
    assert "ĥ = +" in grid_note("hapo", {"entropy": 1.5}) and "ĥ = -" in grid_note("hapo", {"entropy": 0.05})


def test_unknown_inputs_and_bad_ratios_are_refused():
    with pytest.raises(ValueError, match="grid inputs"):
        gradient_weight_surface("ppo-clip", RATIOS, ADVANTAGES, {"entropy": 1.0})
    with pytest.raises(ValueError, match="ratios must be > 0"):
        gradient_weight_surface("bapo", [0.0, 1.0], ADVANTAGES)
    assert set(KNOBS) == {k for knobs in (knob_names(key) for key in KEYS) for k in knobs}  # every knob is used


# ----------------------------------------------------------------------------------------------------
# Figures and grids


@pytest.mark.parametrize("key, inputs", [("ppo-clip", None), ("dual-clip", None), ("policy-shaping", {"p_old": 0.5}),
                                         ("hapo", {"entropy": 2.0})])
def test_heatmaps_draw_the_surface_and_grey_exactly_its_zeros(key, inputs):
    """The one heatmap pair both notebooks draw (zoo and F2): z is the surface, the overlay is 1 where the weight is
    exactly 0 with A != 0, impossible cells (NaN) are blank and never grey, on its own or on a shared colour axis."""
    heat, overlay, w = weight_heatmaps(key, RATIOS, ADVANTAGES, {}, None, inputs)
    np.testing.assert_array_equal(w, gradient_weight_surface(key, RATIOS, ADVANTAGES, inputs))
    np.testing.assert_array_equal(np.asarray(heat.z, float), w.astype(np.float32))
    _, A = grid()
    np.testing.assert_array_equal(np.asarray(overlay.z), ((w == 0) & (A != 0)).astype(np.uint8))
    assert heat.hoverongaps is False and heat.colorscale is not None and heat.coloraxis is None
    shared, _, _ = weight_heatmaps(key, RATIOS, ADVANTAGES, {}, "coloraxis", inputs)
    assert shared.coloraxis == "coloraxis" and shared.colorscale is None


def test_grid_has_a_panel_for_every_policy_objective():
    fig = gradient_weight_grid(ratios=DENSE_RATIOS, advantages=DENSE_ADVANTAGES)
    heatmaps = [t for t in fig.data if t.type == "heatmap" and t.name not in (None, "zero gradient")]
    assert [t.name for t in heatmaps] == POLICY_KEYS  # every objective drew (no error panel)
    titles = [a.text for a in fig.layout.annotations]
    assert titles == POLICY_KEYS
    i = next(i for i, t in enumerate(fig.data) if t.name == "ppo-clip")
    overlay = fig.data[i + 1]  # each heatmap is followed by its zero-gradient overlay
    R, A = grid(DENSE_RATIOS, DENSE_ADVANTAGES)
    np.testing.assert_array_equal(np.asarray(overlay.z), ((ppo_weight(R, A, 0.2, 0.2) == 0) & (A != 0)).astype(int))


def test_grid_shows_a_failing_panel_instead_of_raising():
    fig = gradient_weight_grid(["ppo-clip", ("cispo", {"cap_abs": 0.5})], ratios=DENSE_RATIOS,
                               advantages=DENSE_ADVANTAGES)
    assert [t.name for t in fig.data if t.name != "zero gradient"] == ["ppo-clip"]
    assert any("cap_abs" in (a.text or "") and "ValueError" in a.text for a in fig.layout.annotations)


def test_a_panel_has_one_shape_and_both_grids_draw_its_inputs():
    assert panel_spec("ppo-clip") == ("ppo-clip", {}, {})
    assert panel_spec(("ppo-clip", {"eps_high": 0.28})) == ("ppo-clip", {"eps_high": 0.28}, {})
    assert panel_spec(["hapo", {}, {"entropy": 2.0}]) == ("hapo", {}, {"entropy": 2.0})
    for bad in (("ppo-clip", {}, {}, {}), ("ppo-clip",), {"key": "ppo-clip"}, (1.5, {})):
        with pytest.raises(ValueError, match=r"\(key, hp\) or \(key, hp, inputs\)"):
            panel_spec(bad)
    expected = gradient_weight_surface("hapo", RATIOS, ADVANTAGES, {"entropy": 2.0})
    for draw in (gradient_weight_grid, surface_grid):
        fig = draw([("hapo", {}, {"entropy": 2.0})], ratios=RATIOS, advantages=ADVANTAGES)
        np.testing.assert_array_equal(np.asarray(fig.data[0].z, float), expected.astype(np.float32))
        assert "entropy=2" in fig.layout.annotations[0].text


@pytest.mark.parametrize("key", POLICY_KEYS)
def test_gradient_weight_figure_for_every_objective(key):
    fig = gradient_weight_figure(key, ratios=DENSE_RATIOS, advantages=DENSE_ADVANTAGES)
    assert len(fig.data) == 4 and key in fig.layout.title.text
    plus = next(t for t in fig.data if t.name == "A = +1")
    # the same one-call batch as the figure's slices (objectives may select tokens by a batch statistic)
    np.testing.assert_allclose(plus.y, gradient_weight_surface(key, DENSE_RATIOS, [1.0, -1.0])[0], atol=1e-12)


def test_slices_merge_identical_curves_and_name_every_objective():
    fig = gradient_weight_slices(ratios=DENSE_RATIOS)
    names = [t.name for t in fig.data if t.showlegend]
    assert sorted(k for n in names for k in n.split(" = ")) == sorted(POLICY_KEYS)
    assert any("ppo-clip" in n and "tis" in n for n in names)  # identical per-token rule, one line


@pytest.mark.parametrize("key", ["bapo", "hapo", "policy-shaping", "gbpo", "ppo-clip"])
def test_surface_figure_draws_the_surface_and_its_slices(key):
    fig = surface_figure(key, RATIOS, ADVANTAGES)
    assert len(fig.data) == 4 and fig.layout.title.text.startswith(key)
    np.testing.assert_allclose(np.asarray(fig.data[0].z, float), gradient_weight_surface(key, RATIOS, ADVANTAGES),
                               atol=1e-5)
    plus = next(t for t in fig.data if t.name == "A = +1")
    np.testing.assert_allclose(plus.y, gradient_weight_surface(key, RATIOS, [1.0, -1.0])[0], atol=1e-12)


def test_f2_grid_has_every_drawable_f2_objective_and_names_the_rest():
    fig = surface_grid(ratios=RATIOS, advantages=ADVANTAGES)
    f2 = drawable_keys((F2,))
    heatmaps = [t.name for t in fig.data if t.type == "heatmap" and t.name != "zero gradient"]
    assert heatmaps == f2 and "capo" not in f2 and "bapo" in f2
    note = next(a.text for a in fig.layout.annotations if "not drawn" in (a.text or ""))
    assert all(k in note for k in ("capo", "gui-libra", "safe-kl-control"))
    i = heatmaps.index("dispo")
    np.testing.assert_allclose(np.asarray(fig.data[2 * i].z, float),
                               gradient_weight_surface("dispo", RATIOS, ADVANTAGES), atol=1e-6)
    # panels with settings and inputs; a failing one shows its error instead of raising
    fig = surface_grid(["bapo", ("hapo", {}, {"entropy": 0.05}), ("bapo", {"c_low": 1.5})], ratios=RATIOS,
                       advantages=ADVANTAGES)
    assert [t.name for t in fig.data if t.name != "zero gradient"] == ["bapo", "hapo"]
    assert any("entropy=0.05" in (a.text or "") for a in fig.layout.annotations)
    assert any("ValueError" in (a.text or "") for a in fig.layout.annotations)
