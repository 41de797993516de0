"""Agreement with WooooDyy/BAPO `recipe/bapo/policy_loss.py` (commit 7287044), transcribed in
formulas_trust_region.py: value AND gradient, float64, 1e-6, plus the searched bounds.

`reference_bug=True` is the reference's own counting of pos/neg (effective ratio max(r, c_low) on negative tokens);
with it our `bapo` reproduces the reference exactly. The default counting (only tokens that carry gradient) agrees
with the reference whenever the start bounds already meet the target, and differs where the search runs: there
the reference's neg grows as c_low rises, so its lower bound always runs to its maximum.
"""
from __future__ import annotations

import pytest
import torch

from tests.helpers import anchor_mask, assert_agree, seeded
from tests.anchors.formulas_trust_region import bapo_policy_loss
from workbench.objectives.bapo import adapt_bounds, bapo

D = torch.float64
YAML = dict(c_low=0.6, c_low_max=0.8, step_low=0.05, c_high=1.2, c_high_max=2.0, step_high=0.05, rho0=0.5)
SCRIPT = dict(c_low=0.8, c_low_max=0.95, step_low=0.05, c_high=1.2, c_high_max=2.0, step_high=0.1, rho0=1 / 3)


def reference_kw(hp):
    """Our parameters in the reference's names (adv_ratio_target = rho0 / (1 - rho0))."""
    return dict(ratio_lower_start=hp["c_low"], ratio_lower_max=hp["c_low_max"], ratio_lower_step=hp["step_low"],
                ratio_upper_start=hp["c_high"], ratio_upper_max=hp["c_high_max"], ratio_upper_step=hp["step_high"],
                adv_ratio_target=hp["rho0"] / (1 - hp["rho0"]))


def case(seed, B=10, T=8, neg_bias=0.0, spread=0.45, extreme=True):
    """Ratios spread over about [0.4, 2.5] (a few |log r| > 20 to exercise the clamp), per-sequence advantages of
    both signs shifted by `neg_bias` so that the negative side dominates and the search runs."""
    g = seeded(seed)
    mask = anchor_mask(B, T, g, holes=True)
    old = -3.0 * torch.rand(B, T, generator=g, dtype=D) - 0.05
    logr = spread * torch.randn(B, T, generator=g, dtype=D)
    if extreme:
        logr[0, 0], logr[1, 0] = 25.0, -25.0
    adv = (torch.randn(B, generator=g, dtype=D) - neg_bias)[:, None] * mask
    logp = (old + logr).requires_grad_(True)
    return logp, old, adv, mask


@pytest.mark.covers("bapo")
@pytest.mark.parametrize("hp", [YAML, SCRIPT], ids=["yaml", "script"])
@pytest.mark.parametrize("seed", range(8))
def test_bapo_with_reference_bug_matches_the_reference(hp, seed):
    logp, old, adv, mask = case(seed, neg_bias=0.3 * (seed % 4))
    ref_loss, ref_clipfrac, _, ref_lower, ref_m = bapo_policy_loss(old, logp, adv, mask, **reference_kw(hp))
    ours, m = bapo(logp, old, adv, mask, logr_clamp=20.0, reference_bug=True, **hp)
    assert m["bapo/c_low"] == pytest.approx(ref_m["clip_low"], abs=1e-12)
    assert m["bapo/c_high"] == pytest.approx(ref_m["clip_high"], abs=1e-12)
    share = ref_m["pos_neg_ratio"] / (1 + ref_m["pos_neg_ratio"])  # pos/(neg + 1e-8) -> pos/(pos + neg)
    assert m["bapo/pos_share"] == pytest.approx(share, rel=1e-6)
    assert_agree(ours, ref_loss, leaf=logp)
    assert m["clip/region"] == pytest.approx(float(ref_clipfrac), abs=1e-6)
    assert m["clip/dual"] == pytest.approx(float(ref_lower), abs=1e-6)


@pytest.mark.covers("bapo")
def test_the_cases_exercise_every_branch_of_the_search():
    """Across the seeds above: bounds that stay, a lower bound that stops early, an upper bound that moves."""
    outcomes = set()
    for seed in range(8):
        logp, old, adv, mask = case(seed, neg_bias=0.3 * (seed % 4))
        r = torch.exp((logp - old).clamp(-20, 20)).detach()
        b = adapt_bounds(r, adv, mask, reference_bug=True, **YAML)
        outcomes.add(("low moved" if b.c_low > 0.6 else "low kept", "high moved" if b.c_high > 1.2 else "high kept"))
    assert {("low kept", "high kept"), ("low moved", "high moved")} <= outcomes


@pytest.mark.covers("bapo")
@pytest.mark.parametrize("seed", range(6))
def test_our_reading_agrees_with_the_reference_when_the_start_bounds_meet_the_target(seed):
    logp, old, adv, mask = case(seed, neg_bias=-1.5, extreme=False)  # positive side dominates: no search
    ref_loss, _, _, _, ref_m = bapo_policy_loss(old, logp, adv, mask, **reference_kw(YAML))
    ours, m = bapo(logp, old, adv, mask, logr_clamp=20.0, **YAML)
    assert (ref_m["clip_low"], ref_m["clip_high"]) == (m["bapo/c_low"], m["bapo/c_high"]) == (0.6, 1.2)
    assert_agree(ours, ref_loss, leaf=logp)


@pytest.mark.covers("bapo")
def test_the_reference_bug_pins_the_lower_bound_at_its_max_where_our_reading_stops_early():
    """Negative tokens at r = 0.62 and 0.72 drop out of our neg as c_low passes them (c_low stops at 0.75); the
    reference counts them at max(r, c_low), which only grows, so c_low runs to 0.8 and c_high to 2.0."""
    r = torch.tensor([[1.0, 1.33, 0.9, 0.62, 0.72]], dtype=D)
    adv = torch.tensor([[1.0, 1.0, -1.0, -1.0, -1.0]], dtype=D)
    mask = torch.ones_like(r)
    logp, old = torch.log(r).requires_grad_(True), torch.zeros_like(r)
    _, _, _, _, ref_m = bapo_policy_loss(old, logp, adv, mask, **reference_kw(YAML))
    assert (ref_m["clip_low"], ref_m["clip_high"]) == (0.8, 2.0) and ref_m["pos_neg_ratio"] < 1
    _, bug = bapo(logp, old, adv, mask, reference_bug=True, **YAML)
    _, ours = bapo(logp, old, adv, mask, **YAML)
    assert (bug["bapo/c_low"], bug["bapo/c_high"]) == (0.8, 2.0)
    assert ours["bapo/c_low"] == pytest.approx(0.75) and ours["bapo/c_high"] == 1.2
    assert ours["bapo/pos_share"] == pytest.approx(1.0 / 1.9)
