"""BAPO: the per-batch bound search (bounds only rise, within [start, max], until positive tokens carry rho0 of the
loss) and the dual-clip PPO loss under the searched bounds."""
import pytest
import torch

from tests.helpers import D, grad, random_mask, tokens
from workbench import registry
from workbench.objectives.bapo import adapt_bounds, bapo, contributions
from workbench.objectives.ppo import dual_clip

START = dict(c_low=0.6, c_low_max=0.8, c_high=1.2, c_high_max=2.0)


def off_policy_batch(seed, B=8, T=10, neg_bias=0.5, spread=0.4):
    """Ratios spread around 1 (about [0.4, 2.5]), per-sequence advantages skewed negative by `neg_bias`."""
    g = torch.Generator().manual_seed(seed)
    mask = random_mask(B, T, g, min_len=3)
    old = -torch.rand(B, T, generator=g, dtype=D) * 2
    logp = (old + spread * torch.randn(B, T, generator=g, dtype=D)).requires_grad_(True)
    A = (torch.randn(B, 1, generator=g, dtype=D) - neg_bias).expand(B, T) * mask
    return logp, old, A, mask


def ratios(logp, old):
    return torch.exp(logp.detach() - old)


def share(r, A, mask, c_low, c_high, **kw):
    pos, neg = contributions(r, A, mask, c_low, c_high, **kw)
    return float(pos / (pos + neg))


@pytest.mark.covers("bapo")
def test_bapo_registered_with_the_reference_defaults():
    e = registry.get("objective", "bapo")
    assert {**START, "step_low": 0.05, "step_high": 0.05, "rho0": 0.5, "dual_clip_c": 3.0, "eps": 1e-8,
            "reference_bug": False}.items() <= e.defaults.items()
    assert e.family == "surrogate" and e.confidence == "partial" and e.equation and e.fn.__doc__


@pytest.mark.covers("bapo")
@pytest.mark.parametrize("reference_bug", [False, True])
@pytest.mark.parametrize("seed", range(10))
def test_bounds_only_move_up_and_stay_within_start_and_max(seed, reference_bug):
    """Catalog test (1)."""
    logp, old, A, mask = off_policy_batch(seed, neg_bias=0.2 * (seed % 5))
    b = adapt_bounds(ratios(logp, old), A, mask, reference_bug=reference_bug, **START)
    assert START["c_low"] <= b.c_low <= START["c_low_max"] + 1e-12
    assert START["c_high"] <= b.c_high <= START["c_high_max"] + 1e-12
    if b.c_high > START["c_high"]:  # the upper bound moves only once the lower one is exhausted
        assert b.c_low == START["c_low_max"]


@pytest.mark.covers("bapo")
@pytest.mark.parametrize("reference_bug", [False, True])
@pytest.mark.parametrize("seed", range(10))
def test_after_the_search_the_positive_share_meets_rho0_unless_both_bounds_are_at_max(seed, reference_bug):
    """Catalog test (3), at the default rho0 = 0.5 and at 0.3 / 0.7."""
    logp, old, A, mask = off_policy_batch(seed, neg_bias=0.25 * (seed % 5))
    r = ratios(logp, old)
    for rho0 in (0.3, 0.5, 0.7):
        b = adapt_bounds(r, A, mask, rho0=rho0, reference_bug=reference_bug, **START)
        at_max = b.c_low == START["c_low_max"] and b.c_high == START["c_high_max"]
        assert at_max or b.pos_share >= rho0 - 1e-9, (rho0, b)
        assert b.pos_share == pytest.approx(share(r, A, mask, b.c_low, b.c_high, reference_bug=reference_bug))


@pytest.mark.covers("bapo")
def test_the_search_is_exercised_both_ways_across_the_seeds():
    outcomes = set()
    for seed in range(10):
        logp, old, A, mask = off_policy_batch(seed, neg_bias=0.25 * (seed % 5))
        b = adapt_bounds(ratios(logp, old), A, mask, **START)
        outcomes.add((b.c_low > 0.6, b.c_high > 1.2, b.pos_share >= 0.5))
    assert (False, False, True) in outcomes  # met at the start
    assert any(low and ok for low, _, ok in outcomes)  # met by moving the bounds
    assert (True, True, False) in outcomes or (True, True, True) in outcomes


@pytest.mark.covers("bapo")
@pytest.mark.parametrize("seed", range(6))
def test_when_the_start_bounds_meet_the_target_the_loss_is_fixed_bound_dual_clip(seed):
    """Catalog test (2): no search, so bapo is dual-clip PPO with clip(r, 0.6, 1.2) and c = 3."""
    logp, old, A, mask = off_policy_batch(seed, neg_bias=-1.5)
    loss, m = bapo(logp, old, A, mask)
    assert (m["bapo/c_low"], m["bapo/c_high"]) == (0.6, 1.2) and m["bapo/pos_share"] >= 0.5
    ref, ref_m = dual_clip(logp, old, A, mask, eps_low=1 - 0.6, eps_high=1.2 - 1, dual_clip_c=3.0)
    assert loss.item() == pytest.approx(ref.item(), abs=1e-14)
    torch.testing.assert_close(grad(loss, logp), grad(ref, logp), rtol=0, atol=1e-15)
    assert m["clip/region"] == ref_m["clip/region"] and m["clip/out_of_band"] > 0  # the clip is exercised


@pytest.mark.covers("bapo")
def test_the_bounds_move_until_positive_tokens_carry_the_target_share():
    """Hand-worked searches. Lower bound: negative tokens at r = 0.62, 0.72 leave the gradient as c_low passes them
    (neg 2.24 -> 1.62 -> 0.9), and the search stops at c_low = 0.75 where pos/neg = 1/0.9 >= 1. Upper bound: the
    negative side cannot shrink (r >= 0.8), c_low runs to 0.8, then c_high to 1.35 admits the positive token at
    r = 1.33 (pos 1 -> 2.33 over neg 2)."""
    mask = torch.ones(1, 5, dtype=D)
    A = torch.tensor([[1.0, 1.0, -1.0, -1.0, -1.0]], dtype=D)
    low = adapt_bounds(torch.tensor([[1.0, 1.33, 0.9, 0.62, 0.72]], dtype=D), A, mask, **START)
    assert low.c_low == pytest.approx(0.75) and low.c_high == 1.2 and low.pos_share == pytest.approx(1 / 1.9)
    A = torch.tensor([[1.0, 1.0, -1.0, -1.0, 0.0]], dtype=D)
    high = adapt_bounds(torch.tensor([[1.0, 1.33, 0.9, 1.1, 1.0]], dtype=D), A, mask, **START)
    assert high.c_low == 0.8 and high.c_high == pytest.approx(1.35)
    assert high.pos_share == pytest.approx(2.33 / 4.33)
    stuck = adapt_bounds(torch.tensor([[1.0, 2.5, 0.9, 1.1, 1.0]], dtype=D), A, mask, **START)
    assert (stuck.c_low, stuck.c_high) == (0.8, 2.0) and stuck.pos_share == pytest.approx(1 / 3)


@pytest.mark.covers("bapo")
@pytest.mark.parametrize("seed", range(5))
def test_raising_a_bound_never_lowers_the_positive_share_in_our_reading_but_c_low_does_in_the_reference(seed):
    """The catalog's "decide": counting only gradient-carrying tokens makes both bounds act as the paper says;
    the reference's max(r, c_low) makes neg grow with c_low."""
    logp, old, A, mask = off_policy_batch(seed)
    r = ratios(logp, old)
    lows, highs = torch.linspace(0.6, 0.8, 5).tolist(), torch.linspace(1.2, 2.0, 9).tolist()
    ours_low = [share(r, A, mask, lo, 1.2) for lo in lows]
    ours_high = [share(r, A, mask, 0.8, hi) for hi in highs]
    assert all(b >= a for a, b in zip(ours_low, ours_low[1:])) and ours_low[-1] > ours_low[0]
    assert all(b >= a for a, b in zip(ours_high, ours_high[1:])) and ours_high[-1] > ours_high[0]
    negs = [float(contributions(r, A, mask, lo, 1.2, reference_bug=True)[1]) for lo in lows]
    assert all(b >= a for a, b in zip(negs, negs[1:])) and negs[-1] > negs[0]


@pytest.mark.covers("bapo")
def test_only_gradient_carrying_tokens_count_and_get_gradient():
    """Per token (A, r): counted in pos/neg exactly where the loss has gradient -A r / N."""
    rs = [0.5, 0.7, 1.0, 1.3, 2.5, 4.0]
    for sign in (1.0, -1.0):
        logp, old, A, mask = tokens(rs, [sign] * len(rs))
        loss, m = bapo(logp, old, A, mask, step_low=0.0, step_high=0.0)  # fixed bounds 0.6 / 1.2
        g = grad(loss, logp).flatten()
        pos, neg = contributions(torch.tensor(rs, dtype=D)[:, None], A, mask, 0.6, 1.2)
        live = [(sign > 0 and r <= 1.2) or (sign < 0 and 0.6 <= r <= 3.0) for r in rs]
        expected = torch.tensor([-sign * r / len(rs) if on else 0.0 for r, on in zip(rs, live)], dtype=D)
        torch.testing.assert_close(g, expected, rtol=0, atol=1e-15)
        counted = sum(r for r, on in zip(rs, live) if on)
        assert float(pos if sign > 0 else neg) == pytest.approx(counted)
        assert float(neg if sign > 0 else pos) == 0.0


@pytest.mark.covers("bapo")
def test_no_negative_token_counts_means_share_one_and_no_search():
    logp, old, A, mask = tokens([0.9, 1.1], [1.0, 0.5])
    _, m = bapo(logp, old, A, mask)
    assert (m["bapo/c_low"], m["bapo/c_high"], m["bapo/pos_share"]) == (0.6, 1.2, 1.0)


@pytest.mark.covers("bapo")
@pytest.mark.parametrize("bad,match", [
    (dict(c_low=0.9), "c_low <= c_low_max"), (dict(c_low_max=1.1), "c_low_max <= 1"), (dict(c_low=0.0), "0 < c_low"),
    (dict(c_high=0.9), "1 <= c_high"), (dict(c_high_max=1.1), "c_high <= c_high_max"),
    (dict(step_low=-0.1), "step_low"), (dict(rho0=1.0), "rho0"), (dict(dual_clip_c=1.0), "dual_clip_c")])
def test_bad_bounds_are_refused_with_the_parameter_named(bad, match):
    logp, old, A, mask = tokens([1.0, 1.1], [1.0, -1.0])
    with pytest.raises(ValueError, match=match):
        bapo(logp, old, A, mask, **bad)
