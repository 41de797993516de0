"""Notebook 10's figures (workbench.viz.beyond): every drawable F1/F2 surface is the objective's own autograd weight,
the grid's inputs mean what their knobs say, and the real-batch shares follow the objectives' own metrics. Fast: no
model, only the registered math."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch

from workbench import ops, registry
from workbench.batch import RolloutBatch
from workbench.viz.beyond import (F2, FAMILIES, GRID_HELD, KNOBS, NO_CONTROL, NotDrawable, bapo_bounds_figure,
                                  batch_inputs, beyond_explorer, contribution_figure,
                                  contribution_summary, drawable_keys, dual_ascent_figure, equation_lines,
                                  equations_markdown, explorer_spec, family_objectives, grid_batch, grid_hp, grid_note,
                                  knob_defaults, knob_names, not_drawable, silenced_scatter, surface_figure,
                                  surface_grid, token_weights, weight_surface)

# No point on a band edge (0.8, 1.2, 1.28, VSPO's 1 -+ 0.136, HAPO's 1.265) or a cap (2, 3, 10): a tie splits the
# gradient between branches.
RATIOS = np.array([0.3, 0.75, 0.9, 1.1, 1.25, 1.5, 2.5, 3.5])
ADVANTAGES = np.array([-1.0, -0.3, 0.0, 0.4, 1.0])
KEYS = drawable_keys()
UNIT = ops.Denominators(num_tokens=1.0, num_seqs=1.0, norm_constant=1.0)  # aggregated loss = sum of token losses
ALTERNATIVE = {"old_over_mu": 1.6, "entropy": 0.05, "target_from_A": False, "target_adv": -0.7, "off_policy": True,
               "p_old": 0.3, "task_value": 0.0}


def grid():
    A, R = np.meshgrid(ADVANTAGES, RATIOS, indexing="ij")
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
# Surfaces


@pytest.mark.covers("bapo", "gbpo", "dispo", "hispo", "vspo", "r2vpo", "hapo", "policy-shaping", "aepo-agentic-clip",
                    "dots-rr-clip")
@pytest.mark.parametrize("key, setting", [(k, "defaults") for k in KEYS] + [(k, "alternative") for k in KEYS
                                                                            if knob_names(k)])
def test_surface_is_the_objectives_own_autograd_weight_cell_by_cell(key, setting):
    inputs = alternative(key) if setting == "alternative" else {}
    w = weight_surface(key, RATIOS, ADVANTAGES, inputs)
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
        weight_surface("capo")


@pytest.mark.covers("bapo")
@pytest.mark.parametrize("hp, lo, hi", [({}, 0.6, 1.2), ({"c_low": 0.7, "c_high": 1.6}, 0.7, 1.6)])
def test_bapo_surface_is_dual_clip_ppo_at_its_held_bounds(hp, lo, hi):
    R, A = grid()
    np.testing.assert_allclose(weight_surface("bapo", RATIOS, ADVANTAGES, **hp), ppo_weight(R, A, 1 - lo, hi - 1, 3.0),
                               atol=1e-12)
    assert GRID_HELD["bapo"][0]["step_low"] == 0 and "bounds held" in grid_note("bapo", **hp)


@pytest.mark.covers("gbpo")
@pytest.mark.parametrize("inputs", [{}, {"target_from_A": False, "target_adv": -0.7}])
def test_gbpo_surface_pulls_the_ratio_to_its_target_from_either_side(inputs):
    R, A = grid()
    target = A if inputs.get("target_from_A", True) else np.full_like(A, inputs["target_adv"])
    rho = 0.8 + 0.4 / (1 + np.exp(-target))
    np.testing.assert_allclose(weight_surface("gbpo", RATIOS, ADVANTAGES, inputs),
                               np.abs(A) * R * np.sign(rho - R), atol=1e-12)


@pytest.mark.covers("dispo")
def test_dispo_surface_masks_both_sides_per_class():
    R, A = grid()
    inside = (R >= 0.8) & (R <= 1.28)
    np.testing.assert_allclose(weight_surface("dispo", RATIOS, ADVANTAGES), np.where(inside, A * R, 0.0), atol=1e-12)
    w = weight_surface("dispo", RATIOS, ADVANTAGES, eps_high_neg=0.6, eps_low_pos=0.8)  # the classes differ
    inside = np.where(A > 0, (R >= 0.2) & (R <= 1.28), (R >= 0.8) & (R <= 1.6))
    np.testing.assert_allclose(w, np.where(inside, A * R, 0.0), atol=1e-12)


@pytest.mark.covers("dots-rr-clip", "r2vpo", "hispo")
@pytest.mark.parametrize("w_mu", [1.0, 1.6, 3.0])
def test_behaviour_weight_objectives_follow_pi_old_over_mu(w_mu):
    R, A = grid()
    inputs = {"old_over_mu": w_mu}
    np.testing.assert_allclose(weight_surface("dots-rr-clip", RATIOS, ADVANTAGES, inputs),
                               w_mu * ppo_weight(R, A, 0.2, 0.2), atol=1e-12)
    for lam in (1.0, 0.25):
        np.testing.assert_allclose(weight_surface("r2vpo", RATIOS, ADVANTAGES, inputs, lam=lam),
                                   min(w_mu, 2.0) * (A * R - 2 * lam * (R - 1) * R), atol=1e-12)
    kept = (R * w_mu >= 0.8) & (R * w_mu <= 1.28) & (abs(math.log(w_mu)) <= math.log(2))
    np.testing.assert_allclose(weight_surface("hispo", RATIOS, ADVANTAGES, inputs),
                               np.where(kept, ppo_weight(R, A, 0.2, 0.28), 0.0), atol=1e-12)


@pytest.mark.covers("policy-shaping")
@pytest.mark.parametrize("p_old", [0.1, 0.5])
def test_policy_shaping_surface_reads_the_probability_and_blanks_impossible_cells(p_old):
    R, A = grid()
    p = R * p_old
    w = weight_surface("policy-shaping", RATIOS, ADVANTAGES, {"p_old": p_old})
    expected = np.where(p > 1, np.nan, A * 0.1 * p / (p + 0.1) ** 2)
    np.testing.assert_allclose(w, expected, atol=1e-12)  # NaN where p > 1, in the same cells
    np.testing.assert_allclose(weight_surface("policy-shaping", RATIOS, ADVANTAGES, {"off_policy": False}),
                               ppo_weight(R, A, 0.2, 0.2), atol=1e-12)


@pytest.mark.covers("vspo")
@pytest.mark.parametrize("v", [0.0, 0.09, 0.25])
def test_vspo_surface_narrows_the_band_with_the_task_value(v):
    R, A = grid()
    s = 1 - 0.5 + 0.5 * v / 0.25
    np.testing.assert_allclose(weight_surface("vspo", RATIOS, ADVANTAGES, {"task_value": v}),
                               ppo_weight(R, A, 0.2 * s, 0.2 * s), atol=1e-12)


@pytest.mark.covers("aepo-agentic-clip", "hapo")
def test_entropy_objectives_read_the_tokens_entropy_within_a_fixed_batch():
    R, A = grid()
    ppo = ppo_weight(R, A, 0.2, 0.2)
    high = weight_surface("aepo-agentic-clip", RATIOS, ADVANTAGES, {"entropy": 1.5})
    np.testing.assert_allclose(high, np.where((A > 0) & (R > 1.2), 1.2 * A, ppo), atol=1e-12)  # gradient kept
    np.testing.assert_allclose(weight_surface("aepo-agentic-clip", RATIOS, ADVANTAGES, {"entropy": 0.05}), ppo,
                               atol=1e-12)
    assert "not in the top" in grid_note("aepo-agentic-clip", {"entropy": 0.05})
    # hapo without redistribution and adaptive bounds is dual-clip PPO with c = 10, whatever the entropy
    np.testing.assert_allclose(weight_surface("hapo", RATIOS, ADVANTAGES, {"entropy": 2.5}, clip_alpha=0.0,
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
        weight_surface("ppo-clip", RATIOS, ADVANTAGES, {"entropy": 1.0})
    with pytest.raises(ValueError, match="ratios must be > 0"):
        weight_surface("bapo", [0.0, 1.0], ADVANTAGES)
    assert set(KNOBS) == {k for knobs in (knob_names(key) for key in KEYS) for k in knobs}  # every knob is used


# ----------------------------------------------------------------------------------------------------
# Figures and the explorer


@pytest.mark.parametrize("key", ["bapo", "hapo", "policy-shaping", "gbpo", "ppo-clip"])
def test_surface_figure_draws_the_surface_and_its_slices(key):
    fig = surface_figure(key, RATIOS, ADVANTAGES)
    assert len(fig.data) == 4 and fig.layout.title.text.startswith(key)
    np.testing.assert_allclose(np.asarray(fig.data[0].z, float), weight_surface(key, RATIOS, ADVANTAGES), atol=1e-5)
    plus = next(t for t in fig.data if t.name == "A = +1")
    np.testing.assert_allclose(plus.y, weight_surface(key, RATIOS, [1.0, -1.0])[0], atol=1e-12)


def test_f2_grid_has_every_drawable_f2_objective_and_names_the_rest():
    fig = surface_grid(ratios=RATIOS, advantages=ADVANTAGES)
    f2 = drawable_keys((F2,))
    heatmaps = [t.name for t in fig.data if t.type == "heatmap" and t.name != "zero gradient"]
    assert heatmaps == f2 and "capo" not in f2 and "bapo" in f2
    note = next(a.text for a in fig.layout.annotations if "not drawn" in (a.text or ""))
    assert all(k in note for k in ("capo", "gui-libra", "safe-kl-control"))
    i = heatmaps.index("dispo")
    np.testing.assert_allclose(np.asarray(fig.data[2 * i].z, float), weight_surface("dispo", RATIOS, ADVANTAGES),
                               atol=1e-6)
    # panels with settings and inputs; a failing one shows its error instead of raising
    fig = surface_grid(["bapo", ("hapo", {}, {"entropy": 0.05}), ("bapo", {"c_low": 1.5})], ratios=RATIOS,
                       advantages=ADVANTAGES)
    assert [t.name for t in fig.data if t.name != "zero gradient"] == ["bapo", "hapo"]
    assert any("entropy=0.05" in (a.text or "") for a in fig.layout.annotations)
    assert any("ValueError" in (a.text or "") for a in fig.layout.annotations)


@pytest.mark.parametrize("key", KEYS)
def test_explorer_has_one_control_per_numeric_parameter_of_the_objective(key):
    spec = explorer_spec(key)
    defaults = registry.get("objective", key).defaults
    held = GRID_HELD.get(key, ({}, ""))[0]
    numeric = {n for n, d in defaults.items() if n not in NO_CONTROL and n not in held
               and (n == "dual_clip_c" or isinstance(d, (bool, int, float)))}  # dual_clip_c: "off" or a cap
    assert set(spec["params"]) == numeric
    assert set(spec["params"]) | set(spec["held"]) == set(defaults)  # every parameter shown or listed as held
    assert [k.name for k in spec["knobs"]] == knob_names(key)


def test_explorer_rebuilds_controls_per_objective_and_redraws():
    pytest.importorskip("ipywidgets")
    box = beyond_explorer("bapo")
    assert set(box.controls) == {"objective", "c_low", "c_high", "dual_clip_c", "reference_bug"}
    box.controls["c_high"].value = 1.6
    R, A = grid()
    z = np.asarray(box.figure.data[0].z, float)
    np.testing.assert_allclose(z, weight_surface("bapo", c_high=1.6), atol=1e-5)
    box.controls["objective"].value = "hapo"
    assert {"entropy", "clip_alpha", "adv_beta", "entropy_pivot", "eps_low", "eps_high"} <= set(box.controls)
    assert "c_low" not in box.controls and box.figure.layout.title.text.startswith("hapo")
    box.controls["entropy"].value = 0.05
    np.testing.assert_allclose(np.asarray(box.figure.data[0].z, float),
                               weight_surface("hapo", inputs={"entropy": 0.05}), atol=1e-5)
    box.controls["objective"].value = "policy-shaping"
    box.controls["off_policy"].value = False
    assert "on-policy" in box.figure.layout.title.text
    box.controls["objective"].value = "hapo"
    box.controls["eps_low"].value = 0.6
    box.controls["clip_alpha"].value = 2.0  # eps_low (1 + alpha) >= 1: refused by hapo, shown in the title
    assert "ValueError" in box.figure.layout.title.text
    box.controls["clip_alpha"].value = 0.0
    assert box.figure.layout.title.text.startswith("hapo: per-token")


# ----------------------------------------------------------------------------------------------------
# Real-batch contributions


def toy_batch():
    """Two groups of three one-to-three-token answers, old log-probs, and a moved policy's log-probs."""
    mask = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 1, 0], [1, 0, 0]], dtype=torch.float64)
    batch = RolloutBatch(response_ids=torch.zeros(6, 3, dtype=torch.long), mask=mask,
                         group=torch.tensor([0, 0, 0, 1, 1, 1]),
                         rewards=torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 0.0], dtype=torch.float64))
    batch.advantages = registry.get("advantage", "grpo").fn(batch)
    gen = torch.Generator().manual_seed(0)
    batch.old_logp = -torch.rand(6, 3, generator=gen, dtype=torch.float64) * 3 * mask
    batch.entropy = torch.rand(6, 3, generator=gen, dtype=torch.float64) * mask
    logp = batch.old_logp + torch.tensor([[0.5, -0.1, 0.05], [0.3, -0.4, 0], [0.1, 0, 0], [-0.5, 0.15, 0.6],
                                          [0.02, -0.3, 0], [0.4, 0, 0]], dtype=torch.float64)
    return batch, logp * mask


@pytest.mark.covers("bapo")
def test_token_weights_follow_the_objective_and_bapos_own_share():
    batch, logp = toy_batch()
    r, A = np.exp((logp - batch.old_logp).numpy()), batch.advantages.numpy()
    w, _ = token_weights("ppo-clip", batch, logp)
    np.testing.assert_allclose(w, ppo_weight(r, A, 0.2, 0.2) * batch.mask.numpy(), atol=1e-12)
    w, metrics = token_weights("bapo", batch, logp)
    summary = contribution_summary(w, batch.advantages, batch.mask)
    assert summary["pos_share"] == pytest.approx(metrics["bapo/pos_share"], abs=1e-9)  # BAPO's rho is this share
    valid = batch.mask.numpy() > 0
    assert summary["pos"] == pytest.approx(np.abs(w[valid & (A > 0)]).sum())
    assert summary["tokens"] == int((valid & (A != 0)).sum())
    # cispo never silences a token; ppo-clip silences exactly its clipped ones
    w_cispo, _ = token_weights("cispo", batch, logp)
    assert contribution_summary(w_cispo, batch.advantages, batch.mask)["silenced"] == 0
    w_ppo, _ = token_weights("ppo-clip", batch, logp)
    clipped = valid & (A != 0) & (((A > 0) & (r > 1.2)) | ((A < 0) & (r < 0.8)))
    assert contribution_summary(w_ppo, batch.advantages, batch.mask)["silenced"] == pytest.approx(
        clipped.sum() / (valid & (A != 0)).sum())


def test_batch_inputs_fill_what_a_grpo_batch_lacks():
    batch, logp = toy_batch()
    from workbench.advantages.gbpo import target_advantage

    kw = batch_inputs("gbpo", batch)
    expected = target_advantage(batch.rewards, batch.group)[:, None] * batch.mask
    torch.testing.assert_close(kw["target_adv"], expected)
    assert torch.equal(batch_inputs("r2vpo", batch)["mu_logp"], batch.old_logp)  # no engine log-probs: no mismatch
    assert torch.equal(batch_inputs("policy-shaping", batch)["offpolicy_mask"], torch.zeros_like(batch.mask))
    v = batch_inputs("vspo", batch)["task_value"]
    torch.testing.assert_close(v, torch.tensor([2 / 9] * 6, dtype=torch.float64))  # p = 1/3 and 2/3: p (1 - p)
    assert batch_inputs("ppo-clip", batch) == {}
    for key in ("hapo", "aepo-agentic-clip", "dispo", "vspo", "hispo", "dots-rr-clip", "policy-shaping"):
        w, _ = token_weights(key, batch, logp)
        assert w.shape == (6, 3) and np.all(w[batch.mask.numpy() == 0] == 0)
    with pytest.raises(NotDrawable, match="LM head"):
        batch_inputs("capo", batch)


def test_contribution_and_scatter_figures():
    batch, logp = toy_batch()
    weights = {k: token_weights(k, batch, logp)[0] for k in ("ppo-clip", "bapo", "cispo")}
    summaries = {k: contribution_summary(w, batch.advantages, batch.mask) for k, w in weights.items()}
    fig = contribution_figure(summaries)
    assert list(fig.data[0].x) == pytest.approx([s["pos_share"] for s in summaries.values()])
    assert list(fig.data[1].base) == pytest.approx([s["pos_share"] for s in summaries.values()])
    assert list(fig.data[2].x) == pytest.approx([s["silenced_pos"] for s in summaries.values()])
    fig = silenced_scatter(weights, batch)
    valid = (batch.mask.numpy() > 0) & (batch.advantages.numpy() != 0)
    for i, key in enumerate(weights):
        points = sum(len(t.x) for t in fig.data[3 * i:3 * i + 3])
        assert points == valid.sum()
        assert len(fig.data[3 * i + 2].x) == int((valid & (weights[key] == 0)).sum())


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


def test_equations_and_claims_tables():
    text = equations_markdown()
    entries = [e for e in registry.entries() if e.family == F2 and e.kind != "recipe"]
    lines = text.splitlines()
    assert len(lines) == 2 + len(entries)
    for e, line in zip(entries, lines[2:]):
        assert line.startswith(f"| `{e.key}` | {e.kind} |")
        cells = line.replace(r"\|", "").split("|")  # an escaped pipe does not split a cell
        assert len(cells) == 5, line  # '', key, kind, equation <br> summary, ''
        math, summary = cells[3].strip().split("<br>")
        assert math.startswith("$") and math.endswith("$") and summary.split()[:3] == e.summary.split()[:3]
    assert any(r"\vert" in line for line in lines)
    for e in entries:  # long equations wrap only where each line stays valid LaTeX on its own
        parts = equation_lines(e.equation)
        for part in parts:
            unescaped = re.sub(r"\\[{}]", "", part)
            assert unescaped.count("{") == unescaped.count("}"), part
            assert len(re.findall(r"\\left(?![a-zA-Z])", part)) == len(re.findall(r"\\right(?![a-zA-Z])", part))
            assert part.count(r"\begin") == part.count(r"\end"), part
        squeeze = re.sub(r"\\ |\\quad|[\s;,]", "", e.equation)
        assert re.sub(r"\\ |\\quad|[\s;,]", "", "".join(parts)) == squeeze  # nothing lost
    assert len(equation_lines(registry.get("objective", "hapo").equation)) > 2


@pytest.mark.covers("gui-libra")
def test_success_scale_figure_follows_the_component():
    from workbench.viz.beyond import success_scale_figure

    fig = success_scale_figure(G=4)
    gui = fig.data[0]
    np.testing.assert_allclose(gui.x, [0, 0.25, 0.5, 0.75, 1.0])
    np.testing.assert_allclose(gui.y, [0.5, 0.875, 1.0, 1.0, 1.0])  # clip(0.5 + 1.5 p, 0, 1)
    np.testing.assert_allclose(fig.data[2].y, [1.0] * 5)  # base 1, coef 0: plain GRPO
