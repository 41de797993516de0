"""DISPO: CISPO's weight with four class-wise bounds and zero gradient outside them."""
import pytest
import torch

from tests.helpers import D, grad, random_batch, tokens
from workbench import registry
from workbench.objectives.cispo import cispo
from workbench.objectives.dispo import BOUNDS, dispo

RATIOS = [0.5, 0.7, 0.79, 0.81, 0.95, 1.0, 1.05, 1.27, 1.29, 1.5, 2.0]
BASE = dict(eps_low_pos=0.2, eps_high_pos=0.28, eps_low_neg=0.2, eps_high_neg=0.28)


def grid():
    """One token per (ratio, sign): rows 0..10 correct (A = +1), rows 11..21 incorrect (A = -1)."""
    r = torch.tensor(RATIOS * 2, dtype=D)
    A = torch.tensor([1.0] * len(RATIOS) + [-1.0] * len(RATIOS), dtype=D)
    return tokens(r, A)


def token_grads(**kw):
    logp, old, A, mask = grid()
    loss, m = dispo(logp, old, A, mask, agg="token-mean", **kw)
    return grad(loss * A.numel(), logp)[:, 0], torch.exp(logp.detach())[:, 0], A[:, 0], m


@pytest.mark.covers("dispo")
def test_dispo_registered_with_four_bounds_and_catalog_metadata():
    e = registry.get("objective", "dispo")
    assert e.defaults == {"agg": "token-mean", "denom": None, **BASE, "logr_clamp": None}
    assert e.confidence == "abstract-only" and e.title == registry.catalog()["dispo"]["title"]
    assert e.equation and "Our reading" in e.fn.__doc__


@pytest.mark.covers("dispo", "cispo")
@pytest.mark.parametrize("eps_low, eps_high", [(0.2, 0.28), (0.3, 0.3)])
def test_equal_bounds_and_no_token_outside_is_cispo(eps_low, eps_high):
    logp, old, A, mask = random_batch(3, scale=0.04)
    r = torch.exp(logp.detach() - old)
    assert bool(((r > 1 - eps_low) & (r < 1 + eps_high))[mask > 0].all()) and (r[mask > 0] != 1).all()
    both = dict(eps_low_pos=eps_low, eps_high_pos=eps_high, eps_low_neg=eps_low, eps_high_neg=eps_high)
    for agg in ("token-mean", "seq-mean-token-mean"):
        ours, m = dispo(logp, old, A, mask, agg=agg, **both)
        ref, _ = cispo(logp, old, A, mask, agg=agg, cap_abs=None, eps_low=eps_low, eps_high=eps_high)
        assert ours.item() == pytest.approx(ref.item(), rel=1e-14, abs=1e-16)
        assert torch.allclose(grad(ours, logp), grad(ref, logp), rtol=1e-14, atol=1e-17)
        assert m["dispo/masked_frac"] == 0 and m["clip/out_of_band"] == 0


@pytest.mark.covers("dispo", "cispo")
def test_outside_the_band_dispo_drops_the_token_that_cispo_keeps_clipped():
    logp, old, A, mask = random_batch(4, scale=0.4)
    ours, _ = dispo(logp, old, A, mask, **{k: (0.2 if "low" in k else 0.28) for k in BASE})
    ref, _ = cispo(logp, old, A, mask, cap_abs=None, eps_low=0.2, eps_high=0.28)
    g, g_ref = grad(ours, logp), grad(ref, logp)
    r = torch.exp(logp.detach() - old)
    out = ((r < 0.8) | (r > 1.28)) & (mask > 0) & (A != 0)
    assert out.any() and (~out & (mask > 0)).any()
    assert torch.all(g[out] == 0) and torch.all(g_ref[out] != 0)
    assert torch.equal(g[~out], g_ref[~out])


@pytest.mark.covers("dispo")
def test_tokens_outside_their_class_bounds_get_exactly_zero_gradient():
    g, r, A, m = token_grads(**BASE)
    inside = (r >= 0.8) & (r <= 1.28)
    assert torch.all(g[~inside] == 0)
    assert torch.allclose(g[inside], (-r * A)[inside], rtol=1e-14)  # -sg(r) A ∇logp, per token
    assert torch.all(torch.sign(g[inside]) == -torch.sign(A[inside]))  # descent raises logp of correct tokens
    assert m["dispo/masked_frac"] == pytest.approx(float((~inside).double().mean()))
    assert m["clip/out_of_band"] == m["dispo/masked_frac"]
    n = len(RATIOS) * 2
    assert m["dispo/masked_pos_high"] == pytest.approx(3 / n) and m["dispo/masked_pos_low"] == pytest.approx(3 / n)
    assert m["dispo/masked_neg_high"] == pytest.approx(3 / n) and m["dispo/masked_neg_low"] == pytest.approx(3 / n)


@pytest.mark.covers("dispo")
def test_zero_advantage_tokens_carry_no_gradient_and_no_masked_count():
    logp, old, _, mask = tokens([0.5, 1.0, 2.0], [0.0, 0.0, 0.0])
    loss, m = dispo(logp, old, torch.zeros_like(logp), mask)
    assert torch.all(grad(loss, logp) == 0) and m["dispo/masked_frac"] == 0


REGIME = {"eps_high_pos": lambda r, A: (A > 0) & (r > 1), "eps_low_pos": lambda r, A: (A > 0) & (r < 1),
          "eps_high_neg": lambda r, A: (A < 0) & (r > 1), "eps_low_neg": lambda r, A: (A < 0) & (r < 1)}


@pytest.mark.covers("dispo")
@pytest.mark.parametrize("param", BOUNDS)
def test_the_four_bounds_act_independently(param):
    g0, r, A, _ = token_grads(**BASE)
    g1, _, _, _ = token_grads(**{**BASE, param: 0.6})
    changed = g0 != g1
    assert changed.any()  # widening this bound un-masks some tokens ...
    assert torch.all(REGIME[param](r, A)[changed])  # ... and only tokens of its own class and side
    assert torch.all(g0[changed] == 0) and torch.all(g1[changed] != 0)
    g2, _, _, _ = token_grads(**{**BASE, param: 0.0})  # a zero bound masks its whole side of the class
    assert torch.all(g2[REGIME[param](r, A)] == 0)
    assert torch.equal(g2[~REGIME[param](r, A)], g0[~REGIME[param](r, A)])


@pytest.mark.covers("dispo")
def test_infinite_bounds_are_unclipped_reinforce_with_the_is_weight():
    logp, old, A, mask = random_batch(5, scale=1.0)
    inf = float("inf")
    loss, m = dispo(logp, old, A, mask, **{k: inf for k in BASE})
    r = torch.exp(logp.detach() - old)
    assert torch.allclose(grad(loss, logp), -r * A * mask / mask.sum(), rtol=1e-13, atol=1e-17)
    assert m["dispo/masked_frac"] == 0


@pytest.mark.covers("dispo")
@pytest.mark.parametrize("param", BOUNDS)
@pytest.mark.parametrize("bad", [-0.1, float("nan")])
def test_bad_bounds_are_refused_by_name(param, bad):
    logp, old, A, mask = random_batch(6)
    with pytest.raises(ValueError, match=f"{param} must be >= 0"):
        dispo(logp, old, A, mask, **{**BASE, param: bad})
