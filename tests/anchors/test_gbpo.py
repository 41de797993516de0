"""Agreement with bounded-ratio-rl/bounded_ratio_rl `src/verl/trainer/ppo/core_algos.py` (commit 64ff1cd),
transcribed in formulas_trust_region.py: the advantage and target advantage (values), and the GBPO policy loss
(value AND gradient), float64, 1e-6.

The reference's log-ratio clamp (+-20) is our logr_clamp=20. Groups of one: the reference scores them with mean 0,
std 1, median 0, our allow_singletons="keep" (default: refused; True: A = target = 0); the other cases have G >= 2.
"""
from __future__ import annotations

import pytest
import torch

from tests.helpers import anchor_mask, assert_agree, batch_with_mask, seeded
from tests.anchors.formulas_trust_region import gbpo_outcome_advantage_and_target, gbpo_policy_loss
from workbench import registry

D = torch.float64


def outcome_case(seed, G, n_groups=3, T=7):
    """Rewards in {0, 1, 2} plus noise (one all-equal group, one group with ties), the reference's
    token_level_rewards (outcome on each row's last valid token) and group index."""
    g = seeded(seed)
    B = G * n_groups
    group = torch.arange(n_groups).repeat_interleave(G)
    rewards = torch.randint(0, 3, (B,), generator=g).to(D) + 0.25 * torch.randn(B, generator=g, dtype=D)
    rewards[:G] = 1.0
    rewards[G:G + 2] = 0.5
    mask = anchor_mask(B, T, g, holes=True)
    tlr = torch.zeros(B, T, dtype=D)
    last = (mask * torch.arange(1, T + 1)).argmax(-1)
    tlr[torch.arange(B), last] = rewards
    return batch_with_mask(rewards, group, mask), tlr, group.numpy()


@pytest.mark.covers("gbpo")
@pytest.mark.parametrize("G", [4, 5])
@pytest.mark.parametrize("temperature", [1.0, 1e-4])
@pytest.mark.parametrize("seed", range(3))
def test_gbpo_advantage_and_target_match_the_reference(seed, G, temperature):
    batch, tlr, index = outcome_case(seed, G)
    ref_adv, _, ref_target = gbpo_outcome_advantage_and_target(tlr, batch.mask, index, gbpo_temperature=temperature)
    ours = registry.get("advantage", "gbpo").fn(batch, temperature=temperature)
    torch.testing.assert_close(ours, ref_adv, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(batch.target_adv, ref_target, rtol=1e-6, atol=1e-6)
    assert (batch.target_adv.abs() > 0).any() and (batch.target_adv[:G] == 0).all()


@pytest.mark.covers("gbpo")
@pytest.mark.parametrize("temperature", [1.0, 1e-4])
def test_gbpo_singletons_follow_the_reference_with_allow_singletons_keep(temperature):
    """The reference scores a group of one with mean 0, std 1, median 0: A = R / (1 + eps), target = A / T, which is
    allow_singletons="keep"; True gives both 0 on those rows (the rest unchanged), False refuses."""
    batch, tlr, _ = outcome_case(5, 4)
    batch.group = torch.tensor([0, 0, 0, 0, 1, 2, 2, 2, 3, 3, 3, 4])  # rows 4 and 11 alone
    index = batch.group.numpy()
    ref_adv, _, ref_target = gbpo_outcome_advantage_and_target(tlr, batch.mask, index, gbpo_temperature=temperature)
    fn = registry.get("advantage", "gbpo").fn
    torch.testing.assert_close(fn(batch, temperature=temperature, allow_singletons="keep"), ref_adv, rtol=1e-6,
                               atol=1e-6)
    torch.testing.assert_close(batch.target_adv, ref_target, rtol=1e-6, atol=1e-6)
    assert (batch.target_adv[[4, 11]].abs() > 0).any()
    zeroed = fn(batch, temperature=temperature, allow_singletons=True)
    alone = torch.tensor([i in (4, 11) for i in range(12)])
    assert torch.equal(zeroed[alone], torch.zeros_like(zeroed[alone]))
    assert torch.equal(batch.target_adv[alone], torch.zeros_like(batch.target_adv[alone]))
    torch.testing.assert_close(zeroed[~alone], ref_adv[~alone], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(batch.target_adv[~alone], ref_target[~alone], rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="group of one"):
        fn(batch, temperature=temperature)


@pytest.mark.covers("gbpo")
@pytest.mark.parametrize("eps_low,eps_high", [(0.2, 0.2), (0.3, 0.3), (0.2, 0.28)])
@pytest.mark.parametrize("seed", range(3))
def test_gbpo_policy_loss_matches_the_reference(seed, eps_low, eps_high):
    batch, tlr, index = outcome_case(seed, 4)
    adv, _, target = gbpo_outcome_advantage_and_target(tlr, batch.mask, index)
    g = seeded(100 + seed)
    old = -3.0 * torch.rand(batch.mask.shape, generator=g, dtype=D) - 0.05
    logr = 0.3 * torch.randn(batch.mask.shape, generator=g, dtype=D)
    logr[0, 0], logr[1, 0] = 25.0, -25.0  # the +-20 clamp
    logp = (old + logr).requires_grad_(True)
    ref_loss, ref_clipfrac, _, _ = gbpo_policy_loss(old, logp, adv, batch.mask, target, clip_ratio_low=eps_low,
                                                    clip_ratio_high=eps_high)
    ours, m = registry.get("objective", "gbpo").fn(logp, old, adv, batch.mask, target_adv=target, eps_low=eps_low,
                                                   eps_high=eps_high, logr_clamp=20.0)
    assert_agree(ours, ref_loss, leaf=logp)
    assert m["clip/out_of_band"] == pytest.approx(float(ref_clipfrac), abs=1e-6) and m["clip/out_of_band"] > 0
