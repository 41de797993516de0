"""Clip-Cov and KL-Cov: the token covariance and the tokens each one detaches or penalizes."""
import math

import pytest
import torch

from tests.helpers import D, grad, random_mask
from workbench import ops, registry
from workbench.objectives.entropy_cov import clip_cov, clip_cov_selection, kl_cov, kl_cov_selection, token_covariance
from workbench.objectives.ppo import ppo_clip


def cov_batch(seed, B=8, T=16, a_scale=2.0, scale=0.3):
    """Random batch whose covariances spread over (1, 5): logp in [-3, 0], |A| ~ 2."""
    g = torch.Generator().manual_seed(seed)
    mask = random_mask(B, T, g, min_len=4)
    logp0 = -torch.rand(B, T, generator=g, dtype=D) * 3
    old = logp0 + torch.randn(B, T, generator=g, dtype=D) * scale
    A = (torch.randn(B, 1, generator=g, dtype=D) * a_scale).expand(B, T) * mask
    return logp0.clone().requires_grad_(True), old, A, mask


# ------------------------------------------------------------------------------------------ clip_cov


@pytest.mark.covers("clip_cov", "kl_cov")
def test_cov_registered_with_verl_defaults():
    c, k = registry.get("objective", "clip_cov"), registry.get("objective", "kl_cov")
    assert {"clip_cov_ratio": 2e-4, "clip_cov_lb": 1.0, "clip_cov_ub": 5.0, "eps_low": 0.2,
            "eps_high": 0.2}.items() <= c.defaults.items()
    assert {"kl_cov_ratio": 2e-4, "ppo_kl_coef": 0.1}.items() <= k.defaults.items()
    assert c.family == k.family == "entropy" and c.equation and k.equation


@pytest.mark.covers("clip_cov", "kl_cov")
def test_token_covariance_is_the_centred_product_over_valid_tokens():
    logp, _, A, mask = cov_batch(0)
    cov = token_covariance(logp, A, mask)
    v = mask > 0
    expected = (A[v] - A[v].mean()) * (logp.detach()[v] - logp.detach()[v].mean())
    assert torch.allclose(cov[v], expected, atol=1e-14)
    assert torch.all(torch.isneginf(cov[~v])) and not cov.requires_grad


@pytest.mark.covers("clip_cov")
def test_clip_cov_ratio_zero_without_min_one_is_ppo_clip():
    logp, old, A, mask = cov_batch(1)
    loss, m = clip_cov(logp, old, A, mask, clip_cov_ratio=0.0, min_one=False)
    ref, _ = ppo_clip(logp, old, A, mask)
    assert loss.item() == pytest.approx(ref.item(), abs=1e-15)
    assert torch.equal(grad(loss, logp), grad(ref, logp))
    assert m["clip_cov/detached"] == 0
    # verl's max(int(ratio N), 1) detaches one candidate even at ratio 0
    detached, cand = clip_cov_selection(logp, old, A, mask, clip_cov_ratio=0.0, min_one=True)
    assert cand.sum() > 0 and detached.sum() == 1


@pytest.mark.covers("clip_cov")
@pytest.mark.parametrize("ratio", [0.02, 0.1, 1.0])
def test_clip_cov_detaches_min_k_candidates_inside_band_and_not_ppo_clipped(ratio):
    logp, old, A, mask = cov_batch(2, scale=0.5)
    lb, ub = 1.0, 5.0
    detached, cand = clip_cov_selection(logp, old, A, mask, clip_cov_ratio=ratio, clip_cov_lb=lb, clip_cov_ub=ub)
    k = max(int(ratio * mask.sum()), 1)
    n_cand = int(cand.sum())
    assert n_cand >= 3 and int(detached.sum()) == min(k, n_cand)
    assert torch.all(cand[detached])
    cov = token_covariance(logp, A, mask)
    assert torch.all((cov[detached] > lb) & (cov[detached] < ub))
    r = torch.exp(logp.detach() - old)
    ppo_clipped = ((r > 1.2) & (A > 0)) | ((r < 0.8) & (A < 0))
    assert ppo_clipped[mask > 0].any()  # the exclusion is exercised
    assert not torch.any(detached & ppo_clipped) and not torch.any(cand & ppo_clipped)
    in_band = (mask > 0) & (cov > lb) & (cov < ub) & ~ppo_clipped
    assert torch.equal(cand, in_band)


@pytest.mark.covers("clip_cov")
def test_clip_cov_detached_tokens_have_zero_loss_and_gradient_others_are_ppo():
    logp, old, A, mask = cov_batch(3, scale=0.5)
    kw = dict(clip_cov_ratio=0.05, seed=7)
    loss, m = clip_cov(logp, old, A, mask, **kw)
    detached, _ = clip_cov_selection(logp, old, A, mask, **kw)
    ref, _ = ppo_clip(logp, old, A, mask)
    g, g_ref = grad(loss, logp), grad(ref, logp)
    assert detached.sum() > 1
    assert torch.all(g[detached] == 0) and torch.any(g_ref[detached] != 0)
    assert torch.equal(g[~detached], g_ref[~detached])
    assert m["clip_cov/detached"] == float(detached.sum())
    assert m["clip_cov/detached_frac"] == pytest.approx(float(detached.sum() / mask.sum()))


@pytest.mark.covers("clip_cov")
def test_clip_cov_seeded_selection_is_deterministic_and_uniform():
    logp, old, A, mask = cov_batch(4)
    kw = dict(clip_cov_ratio=0.03)
    a, cand = clip_cov_selection(logp, old, A, mask, seed=11, **kw)
    b, _ = clip_cov_selection(logp, old, A, mask, seed=11, **kw)
    assert torch.equal(a, b)
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    assert torch.equal(clip_cov_selection(logp, old, A, mask, generator=g1, **kw)[0],
                       clip_cov_selection(logp, old, A, mask, generator=g2, **kw)[0])
    # global RNG untouched
    state = torch.get_rng_state()
    clip_cov(logp, old, A, mask, **kw)
    assert torch.equal(state, torch.get_rng_state())
    # statistical cross-check of randperm selection: every candidate picked with probability k / n
    gen = torch.Generator().manual_seed(0)
    n_draws = 400
    counts = sum(clip_cov_selection(logp, old, A, mask, generator=gen, **kw)[0].double() for _ in range(n_draws))
    n, k = int(cand.sum()), max(int(0.03 * mask.sum()), 1)
    assert 1 < k < n
    p = k / n
    freq = counts[cand] / n_draws
    assert torch.all(counts[~cand] == 0)
    assert float(freq.mean()) == pytest.approx(p, rel=1e-12)  # exactly k per draw
    assert float((freq - p).abs().max()) < 5 * math.sqrt(p * (1 - p) / n_draws)


# -------------------------------------------------------------------------------------------- kl_cov


@pytest.mark.covers("kl_cov")
def test_kl_cov_ratio_zero_is_the_unclipped_surrogate():
    logp, old, A, mask = cov_batch(5, scale=0.5)
    for min_one in (False, True):  # verl applies no penalty at ratio 0 even with its max(1, .)
        loss, m = kl_cov(logp, old, A, mask, kl_cov_ratio=0.0, min_one=min_one)
        ref, _ = ppo_clip(logp, old, A, mask, eps_low=1e9, eps_high=1e9)
        assert loss.item() == pytest.approx(ref.item(), abs=1e-15)
        assert torch.allclose(grad(loss, logp), grad(ref, logp), atol=1e-16)
        assert m["kl_cov/penalized"] == 0
    expected = ops.masked_mean(-A * torch.exp(logp.detach() - old), mask)
    assert kl_cov(logp, old, A, mask, kl_cov_ratio=0.0)[0].item() == pytest.approx(expected.item(), abs=1e-15)


@pytest.mark.covers("kl_cov")
@pytest.mark.parametrize("ratio", [1e-4, 0.05, 0.2])
def test_kl_cov_penalizes_exactly_the_top_k_covariance_tokens(ratio):
    logp, old, A, mask = cov_batch(6, scale=0.5)
    coef = 0.1
    loss, m = kl_cov(logp, old, A, mask, kl_cov_ratio=ratio, ppo_kl_coef=coef)
    ref, _ = kl_cov(logp, old, A, mask, kl_cov_ratio=0.0)
    extra = grad(loss, logp) - grad(ref, logp)
    k = max(1, int(mask.sum() * ratio))
    penalized = extra != 0
    assert int(penalized.sum()) == k == m["kl_cov/penalized"]
    assert torch.equal(penalized, kl_cov_selection(logp, A, mask, kl_cov_ratio=ratio))
    cov = token_covariance(logp, A, mask)
    rest = cov[(mask > 0) & ~penalized]
    assert rest.numel() > 0 and float(cov[penalized].min()) >= float(rest.max())
    # the penalty pulls logp toward old: descent direction -extra has the sign of old - logp
    n = mask.sum()
    assert torch.allclose(extra[penalized], coef * torch.sign(logp.detach() - old)[penalized] / n, atol=1e-15)


@pytest.mark.covers("kl_cov")
def test_kl_cov_penalty_step_shrinks_abs_kl_only_on_penalized_tokens():
    logp, old, A, mask = cov_batch(8, scale=0.5)
    loss, _ = kl_cov(logp, old, A, mask, kl_cov_ratio=0.1, ppo_kl_coef=0.1)
    surrogate, _ = kl_cov(logp, old, A, mask, kl_cov_ratio=0.0)
    penalty_grad = grad(loss, logp) - grad(surrogate, logp)
    sel = kl_cov_selection(logp, A, mask, kl_cov_ratio=0.1)
    new = logp.detach() - 1e-2 * penalty_grad
    d_old, d_new = (logp.detach() - old).abs(), (new - old).abs()
    assert sel.sum() > 1
    assert torch.all(d_new[sel] < d_old[sel]) and torch.equal(d_new[~sel], d_old[~sel])
