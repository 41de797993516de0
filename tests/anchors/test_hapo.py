"""Agreement with HAPO's code (tests/anchors/formulas_hapo.py, starriver030515/HAPO @ 7671dde): value AND
gradient, float64, 1e-6.

    compute_entropy_h              `normalized_entropy` / `entropy_stats` with reference_bug=True exactly; the
                                   fixed mapping differs only by the sign of h_hat on h <= 0
    compute_policy_loss (HAPO)     `objective:hapo` with reference_bug=True (adaptive_clip, adaptive_advantage,
                                   clip_ratio_c = 10, entropy_pivot = 0.8); reference_bug=False equals the same
                                   code with the documented one-line fix of compute_entropy_h
    compute_hapo_outcome_advantage `advantage:hapo` with reference_bug=True on the valid tokens; without the
                                   padding quirk wherever no padding reaches the |A| >= 5 test
    compute_entropy_based_temperature (the vLLM sampler patch)  `AdaptiveTemperature.temperatures` at T = 1
"""
from __future__ import annotations

import pytest
import torch

from tests.helpers import anchor_mask, assert_agree, batch_with_mask, seeded
from tests.anchors import formulas_hapo as ref
from workbench.advantages.hapo import hapo as hapo_advantage
from workbench.objectives.hapo import EntropyStats, entropy_stats, hapo, normalized_entropy
from workbench.rollout.hapo_temperature import AdaptiveTemperature

pytestmark = pytest.mark.covers("hapo", "hapo-temperature")
F64 = torch.float64


def case(seed, B=8, T=10, scale=0.3):
    """Random logp leaf, old, per-sequence advantages, ragged mask (row 0 full) and positive entropies."""
    g = seeded(seed)
    mask = anchor_mask(B, T, g)
    old = -torch.rand(B, T, generator=g, dtype=F64) * 2
    logp = (old + torch.randn(B, T, generator=g, dtype=F64) * scale).requires_grad_(True)
    A = torch.randn(B, 1, generator=g, dtype=F64).expand(B, T) * mask
    H = torch.exp(torch.randn(B, T, generator=g, dtype=F64) * 1.5)
    return logp, old, A, mask, H


CODE_ENTROPY_H = ref.compute_entropy_h


def fixed_compute_entropy_h(entropy, eps=1e-8, response_mask=None, entropy_pivot=0.5):
    """The reference with the catalog's fix: h <= 0 divided by |min(h < 0)| (scale_neg -> -scale_neg)."""
    h_hat, (median, std, scale_pos, scale_neg) = CODE_ENTROPY_H(entropy, eps, response_mask, entropy_pivot)
    below = torch.log(entropy.clamp_min(eps)) - median <= 0  # h <= 0: h * scale_neg -> h * (-scale_neg)
    return torch.where(below, -h_hat, h_hat), (median, std, scale_pos, -scale_neg)


@pytest.mark.parametrize("seed", range(4))
def test_entropy_normalization_matches_compute_entropy_h(seed):
    _, _, _, mask, H = case(seed)
    theirs, (median, std, scale_pos, scale_neg) = ref.compute_entropy_h(H, response_mask=mask, entropy_pivot=0.8)
    stats = entropy_stats(H, mask, pivot_quantile=0.8)
    assert stats.pivot == pytest.approx(median.item(), abs=1e-12) and stats.std == pytest.approx(std.item())
    assert 1 / stats.pos_max == pytest.approx(scale_pos.item()) and 1 / stats.neg_min == pytest.approx(scale_neg.item())
    v = mask > 0
    assert_agree(normalized_entropy(H, stats, reference_bug=True)[v], theirs[v])
    # the fix: same magnitude, negative on the tokens below the pivot (the code's h_hat is >= 0 on every one)
    h = torch.log(H) - median
    assert (theirs[v] >= 0).all() and (h[v] < 0).any()
    assert_agree(normalized_entropy(H, stats)[v], torch.where(h[v] > 0, theirs[v], -theirs[v]))


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
@pytest.mark.parametrize("seed", range(4))
def test_policy_loss_matches_hapos_compute_policy_loss(seed, agg, monkeypatch):
    logp, old, A, mask, H = case(seed)
    kw = dict(cliprange=0.2, cliprange_low=0.2, cliprange_high=0.2, clip_ratio_c=10.0, loss_agg_mode=agg,
              entropy_pivot=0.8, adaptive_clip=True, clip_alpha=1.0, adaptive_advantage=True, adv_beta=1.0, entropy=H)
    theirs, clipfrac, _, _ = ref.compute_policy_loss(old, logp, A, mask, **kw)
    ours, metrics = hapo(logp, old, A, mask, entropy=H, agg=agg, reference_bug=True)
    assert_agree(ours, theirs, logp)
    assert clipfrac.item() > 0  # the adapted bounds are exercised, not only r inside them
    monkeypatch.setattr(ref, "compute_entropy_h", fixed_compute_entropy_h)
    fixed = ref.compute_policy_loss(old, logp, A, mask, **kw)[0]
    ours_fixed, _ = hapo(logp, old, A, mask, entropy=H, agg=agg)
    assert_agree(ours_fixed, fixed, logp)
    assert abs(ours_fixed.item() - ours.item()) > 1e-6  # the fix changes the loss


@pytest.mark.parametrize("seed", range(4))
def test_advantage_matches_compute_hapo_outcome_advantage(seed):
    g = seeded(seed)
    G, n = 4, 4
    B, T = G * n, 9
    mask = anchor_mask(B, T, g)
    rewards = torch.randint(0, 2, (B,), generator=g).to(F64)
    rewards[G:2 * G] = torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=F64)
    mask[G:2 * G] = 0.0  # a group whose one short correct answer pushes |A| past 5: the GRPO fallback
    mask[G, :1] = 1.0
    mask[G + 1:2 * G, :] = 1.0
    group = torch.arange(n).repeat_interleave(G)
    token_level_rewards = torch.zeros(B, T, dtype=F64)
    last = mask.sum(-1).long() - 1
    token_level_rewards[torch.arange(B), last] = rewards
    theirs, _ = ref.compute_hapo_outcome_advantage(token_level_rewards, mask, group.tolist(),
                                                   entropys=torch.zeros(B, T, dtype=F64))
    batch = batch_with_mask(rewards, group, mask)
    v = mask > 0
    assert_agree(hapo_advantage(batch, reference_bug=True)[v], theirs[v])
    grpo_theirs, _ = ref.compute_grpo_outcome_advantage(token_level_rewards, mask, group.tolist())
    assert torch.allclose(theirs[G:2 * G][v[G:2 * G]], grpo_theirs[G:2 * G][v[G:2 * G]])  # the fallback fired


def test_advantage_fix_differs_only_where_padding_decides_the_fallback():
    # group 0: rewards far from 0, small spread, shorter than the batch width -> the code falls back on padding
    mask = torch.zeros(8, 6, dtype=F64)
    mask[:4, :3], mask[4:, :] = 1.0, 1.0
    rewards = torch.tensor([10.0, 10.5, 10.0, 10.5, 1.0, 0.0, 0.0, 1.0], dtype=F64)
    group = torch.arange(2).repeat_interleave(4)
    token_level_rewards = torch.zeros(8, 6, dtype=F64)
    token_level_rewards[torch.arange(8), mask.sum(-1).long() - 1] = rewards
    theirs, _ = ref.compute_hapo_outcome_advantage(token_level_rewards, mask, group.tolist(),
                                                   entropys=torch.zeros(8, 6, dtype=F64))
    batch = batch_with_mask(rewards, group, mask)
    v = mask > 0
    assert_agree(hapo_advantage(batch, reference_bug=True)[v], theirs[v])
    fixed = hapo_advantage(batch)
    assert torch.allclose(fixed[4:], theirs[4:] * mask[4:])
    assert fixed[0, 0].item() == pytest.approx(-1.0, abs=1e-5)  # token level: (10 - 10.25) / 0.25
    assert theirs[0, 0].item() == pytest.approx(-0.25 / (0.25 * (4 / 3) ** 0.5), abs=1e-5)  # GRPO fallback


def test_singleton_groups_follow_the_code_with_allow_singletons_keep():
    """A group of one: the code's token-level A is 0 (its mean is its own reward), unless its padding, holding
    (0 - R) / eps, trips the |A| >= 5 test and it falls back to verl's GRPO, A = R / (1 + eps). Row 4 (padded) falls
    back, row 5 (full width) does not: "keep" with reference_bug=True is the code; without the padding check both are 0;
    True gives 0 whatever the fallback; False refuses."""
    mask = torch.zeros(6, 5, dtype=F64)
    mask[:4, :4], mask[4, :2], mask[5, :] = 1.0, 1.0, 1.0
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 3.0, 2.0], dtype=F64)
    group = torch.tensor([0, 0, 0, 0, 1, 2])
    token_level_rewards = torch.zeros(6, 5, dtype=F64)
    token_level_rewards[torch.arange(6), mask.sum(-1).long() - 1] = rewards
    theirs, _ = ref.compute_hapo_outcome_advantage(token_level_rewards, mask, group.tolist(),
                                                   entropys=torch.zeros(6, 5, dtype=F64))
    batch = batch_with_mask(rewards, group, mask)
    v = mask > 0
    assert_agree(hapo_advantage(batch, reference_bug=True, allow_singletons="keep")[v], theirs[v])
    assert theirs[4, 0].item() == pytest.approx(3.0 / (1 + 1e-6)) and theirs[5, 0].item() == 0.0
    fixed = hapo_advantage(batch, allow_singletons="keep")
    assert torch.equal(fixed[4:], torch.zeros_like(fixed[4:])) and torch.allclose(fixed[:4], theirs[:4] * mask[:4])
    zeroed = hapo_advantage(batch, reference_bug=True, allow_singletons=True)
    assert torch.equal(zeroed[4:], torch.zeros_like(zeroed[4:]))
    with pytest.raises(ValueError, match="group of one"):
        hapo_advantage(batch, reference_bug=True)


@pytest.mark.parametrize("bug", [True, False])
@pytest.mark.parametrize("seed", range(3))
def test_adaptive_temperature_matches_the_sampler_patch(seed, bug):
    """HAPO's sampler at T = 1 with the statistics of a previous batch (the code's, or the fixed mapping's)."""
    _, _, _, mask, H = case(seed)
    _, norm = ref.compute_entropy_h(H, response_mask=mask, entropy_pivot=0.8)
    median, std, scale_pos, scale_neg = norm
    stats = EntropyStats(median.item(), std.item(), 1 / scale_pos.item(), 1 / scale_neg.item())
    if not bug:
        norm = (median, std, scale_pos, -scale_neg)
    logits = torch.randn(64, 2000, generator=seeded(seed + 7)) * torch.linspace(0, 4, 64)[:, None]  # float32
    theirs = ref.compute_entropy_based_temperature(logits, 1.0, True, 0.05, norm)
    ours = AdaptiveTemperature(stats, temperature=1.0, tau=0.05, reference_bug=bug).temperatures(logits)
    torch.testing.assert_close(ours.double(), theirs.double(), rtol=0, atol=1e-5)  # the sampler's eps: 1e-6 on std
    assert (theirs > 1.0).any() and ((theirs < 1.0).any() != bug)  # the bug never cools a token

