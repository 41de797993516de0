"""HAPO's surrogate: the normalized entropy, adaptive clip bounds, advantage redistribution, and the reductions
to PPO-clip / DAPO."""
import math

import pytest
import torch

from tests.helpers import D, grad, make_batch, random_batch, random_mask
from workbench import registry
from workbench.advantages.group import grpo
from workbench.advantages.hapo import hapo as hapo_advantage
from workbench.objectives.hapo import (EntropyStats, adaptive_clip_bounds, entropy_stats, hapo, nearest_quantile,
                                       normalized_entropy, redistributed_advantages)
from workbench.objectives.ppo import ppo_clip

pytestmark = pytest.mark.covers("hapo")


def entropies(seed, B=6, T=9):
    """Random positive entropies [B, T] spread over about two decades, and a ragged mask."""
    g = torch.Generator().manual_seed(seed)
    mask = random_mask(B, T, g, min_len=3)
    return torch.exp(torch.randn(B, T, generator=g, dtype=D) * 1.5) * mask, mask


def test_registered_with_the_recipe_scripts_defaults():
    entry = registry.get("objective", "hapo")
    assert {"eps_low": 0.2, "eps_high": 0.2, "dual_clip_c": 10.0, "clip_alpha": 1.0, "adv_beta": 1.0,
            "entropy_pivot": 0.8, "reference_bug": False, "logr_clamp": None}.items() <= entry.defaults.items()
    assert entry.reads == ("entropy",) and entry.confidence == "exact" and entry.equation


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_normalized_entropy_keeps_the_sign_of_h_and_spans_minus_one_to_one(seed):
    """Catalog test (3): sign(h_hat) = sign(h), |h_hat| <= 1, both ends reached on the valid tokens."""
    H, mask = entropies(seed)
    stats = entropy_stats(H, mask, pivot_quantile=0.8)
    h = (torch.log(H.clamp(min=1e-8)) - stats.pivot) / stats.std
    h_hat = normalized_entropy(H, stats)
    v = mask > 0
    assert torch.equal(torch.sign(h_hat[v]), torch.sign(h[v]))
    assert h_hat[v].max().item() == pytest.approx(1.0) and h_hat[v].min().item() == pytest.approx(-1.0)
    # the pivot is the 0.8 quantile of log H: about 20 % of the valid tokens lie above it
    assert (h[v] > 0).double().mean().item() == pytest.approx(0.2, abs=1 / v.sum().item() + 1e-9)
    # h is measured against the spread about the pivot: mean h^2 = 1 over the valid tokens
    assert (h[v] ** 2).mean().item() == pytest.approx(1.0)


@pytest.mark.parametrize("seed", [0, 1])
def test_reference_bug_maps_low_entropy_tokens_to_non_negative_values(seed):
    H, mask = entropies(seed)
    stats = entropy_stats(H, mask)
    fixed, buggy = normalized_entropy(H, stats), normalized_entropy(H, stats, reference_bug=True)
    v = mask > 0
    assert (buggy[v] >= 0).all() and (fixed[v] < 0).any()
    assert torch.equal(buggy[v], torch.where(fixed[v] > 0, fixed[v], -fixed[v]))


def test_stats_of_a_known_case():
    # log H = (0, 1, 2, 3, 4): the 0.8 quantile (nearest, index round(3.2) = 3) is 3, s^2 = (9+4+1+0+1)/5 = 3
    H = torch.exp(torch.arange(5, dtype=D))[None, :]
    stats = entropy_stats(H, torch.ones_like(H))
    assert stats.pivot == pytest.approx(3.0) and stats.std == pytest.approx(math.sqrt(3))
    assert stats.pos_max == pytest.approx(1 / math.sqrt(3)) and stats.neg_min == pytest.approx(-3 / math.sqrt(3))
    assert normalized_entropy(H, stats)[0].tolist() == pytest.approx([-1, -2 / 3, -1 / 3, 0, 1])
    assert nearest_quantile(torch.tensor([4.0, 1.0, 3.0, 2.0]), 0.5).item() == 3.0  # round(1.5) = 2 (half to even)
    # outside the statistics' batch (the sampler's case) values are clipped to [-1, 1]
    assert normalized_entropy(torch.tensor([math.exp(10.0), math.exp(-10.0)], dtype=D), stats).tolist() == [1, -1]


def test_clip_bounds_only_widen_and_stay_positive():
    """Catalog test (3): for |h_hat| <= 1 the bounds stay positive (and the lower ratio bound above 0)."""
    h_hat = torch.linspace(-1, 1, 41, dtype=D)
    low, high = adaptive_clip_bounds(h_hat, 0.2, 0.28, 1.0)
    assert (low >= 0.2).all() and (high >= 0.28).all() and (1 - low > 0).all()
    assert torch.allclose(low, torch.where(h_hat <= 0, 0.2 * (1 - h_hat), torch.full_like(h_hat, 0.2)))
    assert torch.allclose(high, torch.where(h_hat > 0, 0.28 * (1 + h_hat), torch.full_like(h_hat, 0.28)))
    assert low[0].item() == pytest.approx(0.4) and high[-1].item() == pytest.approx(0.56)
    x = torch.zeros(2, 3, dtype=D)
    with pytest.raises(ValueError, match=r"eps_low \* \(1 \+ clip_alpha\) must be < 1"):
        hapo(x, x, x, torch.ones_like(x), entropy=x + 1, eps_low=0.6, clip_alpha=1.0)
    with pytest.raises(ValueError, match="clip_alpha must be >= 0"):
        hapo(x, x, x, torch.ones_like(x), entropy=x + 1, clip_alpha=-0.5)


def test_redistribution_by_entropy_and_ratio():
    """High-entropy tokens are rescaled outside the neutral zone, low-entropy ones inside it."""
    h_hat = torch.tensor([0.5, 0.5, -0.5, -0.5], dtype=D)
    r = torch.tensor([1.0, 1.3, 1.0, 1.3], dtype=D)  # neutral zone (0.9, 1.1) at eps 0.2 / 0.2
    A = torch.full_like(r, 2.0)
    adv, scaled = redistributed_advantages(A, h_hat, r, torch.full_like(r, 0.2), torch.full_like(r, 0.2), 1.0)
    assert adv.tolist() == pytest.approx([2.0, 3.0, 1.0, 2.0]) and scaled.tolist() == [False, True, True, False]
    # the neutral zone follows the adapted bounds: eps_high' = 0.8 puts r = 1.3 inside (1 + 0.4)
    adv, _ = redistributed_advantages(A, h_hat, r, torch.full_like(r, 0.2), torch.full_like(r, 0.8), 1.0)
    assert adv[1].item() == 2.0


def one_token(h_hat_sign, r, A):
    """A one-token batch plus filler tokens so that the token's h_hat is +1 (sign 1) or -1 (sign -1)."""
    # log H = 0, 1, 2, 3, 4: index 4 has h_hat = 1 and index 0 has h_hat = -1 (test_stats_of_a_known_case)
    H = torch.exp(torch.arange(5, dtype=D))[None, :]
    t = 4 if h_hat_sign > 0 else 0
    old = torch.zeros_like(H)
    logp = old.clone()
    logp[0, t] = math.log(r)
    Amat = torch.zeros_like(H)
    Amat[0, t] = A
    return logp.requires_grad_(True), old, Amat, torch.ones_like(H), H, t


def test_a_high_entropy_token_is_clipped_only_past_its_widened_upper_bound():
    # h_hat = 1: eps_high' = 0.4; r = 1.3 is past PPO's 1.2 but inside 1.4, and outside the neutral zone (1.2)
    logp, old, A, mask, H, t = one_token(+1, 1.3, 1.0)
    loss, m = hapo(logp, old, A, mask, entropy=H)
    g = grad(loss, logp)[0, t].item()
    assert g == pytest.approx(-1.3 * 2.0 / 5)  # -A' r / N with A' = A (1 + h_hat) = 2
    ref, _ = ppo_clip(logp, old, A, mask)
    assert grad(ref, logp)[0, t].item() == 0.0  # plain PPO clips it
    logp2, *_ = one_token(+1, 1.5, 1.0)
    assert grad(hapo(logp2, old, A, mask, entropy=H)[0], logp2)[0, t].item() == 0.0  # past 1.4: clipped
    assert m["hapo/eps_high_mean"] == pytest.approx((0.2 * 4 + 0.4) / 5)


def test_a_low_entropy_token_may_be_pushed_down_further():
    # h_hat = -1: eps_low' = 0.4, so r = 0.7 (past PPO's 0.8) with A < 0 still has a gradient; inside the
    # neutral zone? no (0.7 < 0.8), so A' = A
    logp, old, A, mask, H, t = one_token(-1, 0.7, -1.0)
    loss, _ = hapo(logp, old, A, mask, entropy=H)
    assert grad(loss, logp)[0, t].item() == pytest.approx(0.7 / 5)
    ref, _ = ppo_clip(logp, old, A, mask)
    assert grad(ref, logp)[0, t].item() == 0.0
    # inside the neutral zone (r = 1) a low-entropy token's advantage is scaled by 1 + beta h_hat = 0
    logp1, old, A, mask, H, t = one_token(-1, 1.0, -1.0)
    assert grad(hapo(logp1, old, A, mask, entropy=H)[0], logp1)[0, t].item() == 0.0
    assert grad(hapo(logp1, old, A, mask, entropy=H, adv_beta=0.5)[0], logp1)[0, t].item() == pytest.approx(0.5 / 5)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_alpha_and_beta_zero_is_ppo_clip(seed):
    """Catalog test (1), objective half: no adaptation is PPO-clip (with HAPO's dual clip, or without one)."""
    logp, old, A, mask = random_batch(seed, scale=0.4)
    H, _ = entropies(seed + 10, *mask.shape)
    H = H + (mask == 0).double()  # positive everywhere
    for c in (10.0, None):
        ours, m = hapo(logp, old, A, mask, entropy=H, clip_alpha=0.0, adv_beta=0.0, dual_clip_c=c)
        ref, m_ref = ppo_clip(logp, old, A, mask, dual_clip_c=c)
        assert ours.item() == pytest.approx(ref.item(), abs=1e-15)
        assert torch.equal(grad(ours, logp), grad(ref, logp))
        assert m["clip/region"] == m_ref["clip/region"]


def test_equal_lengths_and_no_adaptation_is_dapo_with_the_population_std():
    """Catalog test (1): advantage and loss together reduce to PPO-clip on GRPO advantages (std over the group's
    tokens = the population std); the temperature half (tau = 0) is tests/rollout/test_hapo_temperature.py."""
    g = torch.Generator().manual_seed(5)
    batch = make_batch(torch.rand(8, generator=g, dtype=D).tolist(), [0] * 4 + [1] * 4, [6] * 8)
    old = -torch.rand(8, 6, generator=g, dtype=D)
    logp = (old + 0.3 * torch.randn(8, 6, generator=g, dtype=D)).requires_grad_(True)
    H = torch.rand(8, 6, generator=g, dtype=D) + 0.1
    ours, _ = hapo(logp, old, hapo_advantage(batch), batch.mask, entropy=H, clip_alpha=0, adv_beta=0,
                   dual_clip_c=None)
    ref, _ = ppo_clip(logp, old, grpo(batch, unbiased=False), batch.mask)
    assert ours.item() == pytest.approx(ref.item(), abs=1e-12)
    assert torch.allclose(grad(ours, logp), grad(ref, logp), atol=1e-12)


def test_dual_clip_caps_negative_advantage_tokens_at_c():
    logp, old, A, mask, H, t = one_token(+1, 20.0, -1.0)
    _, m = hapo(logp, old, A, mask, entropy=H)
    assert m["clip/dual"] == pytest.approx(1 / 5)
    loss, _ = hapo(logp, old, A, mask, entropy=H, agg="token-mean")
    # A' = A (1 + h_hat) = -2 outside the neutral zone; capped at -c A' = 20
    assert loss.item() == pytest.approx(20.0 / 5)
    assert grad(loss, logp)[0, t].item() == 0.0


def test_metrics_and_input_errors():
    logp, old, A, mask = random_batch(0)
    H, _ = entropies(0, *mask.shape)
    _, m = hapo(logp, old, A, mask, entropy=H + 1e-3)
    assert {"hapo/high_entropy_frac", "hapo/redistributed_frac", "hapo/eps_low_mean", "hapo/eps_high_mean",
            "clip/dual", "clip/region"} <= set(m)
    assert all(isinstance(v, float) for v in m.values())
    with pytest.raises(ValueError, match="entropy has shape"):
        hapo(logp, old, A, mask, entropy=H[:, :3])
    with pytest.raises(ValueError, match=r"adv_beta must be in \[0, 1\]"):
        hapo(logp, old, A, mask, entropy=H, adv_beta=1.5)
    with pytest.raises(ValueError, match=r"entropy_pivot must be in \[0, 1\]"):
        hapo(logp, old, A, mask, entropy=H, entropy_pivot=1.2)
    with pytest.raises(ValueError, match="dual_clip_c must be > 1"):
        hapo(logp, old, A, mask, entropy=H, dual_clip_c=1.0)
    with pytest.raises(ValueError, match="all zero"):
        hapo(logp, old, A, torch.zeros_like(mask), entropy=H)
    assert isinstance(entropy_stats(H + 1e-3, mask), EntropyStats)
