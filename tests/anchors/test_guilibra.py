"""Agreement with GUI-Libra's EasyR1 RL code (transcribed in formulas_guilibra.py): the `gui-libra` recipe's
advantage chain, KL term and policy loss, with the recipe's own parameters; values and gradients, float64, 1e-6."""
from __future__ import annotations

import pytest
import torch

from tests.helpers import AGREE_TOL, anchor_mask, assert_agree, batch_with_mask, seeded
from tests.anchors.formulas_guilibra import (average_loss_token, compute_grpo_weighted_positive_negative,
                                               compute_kl_low_var_kl, compute_policy_loss_default)
from workbench import registry
from workbench.advantages.base import last_token_mask
from workbench.objectives.ppo import ppo_clip
from workbench.recipes import get_recipe
from workbench.regularizers.kl_penalty import kl_in_loss

F64 = torch.float64
RECIPE = get_recipe("gui-libra")


def chain(batch):
    """The recipe's advantage chain (grpo, then gui-libra) with its keyword arguments."""
    for u in RECIPE.advantage:
        batch.advantages = registry.get("advantage", u.key).fn(batch, **u.kw)
    return batch.advantages


def outcome_case(seed, G=5, n_groups=4, T=6, partial=False):
    g = seeded(seed)
    B = G * n_groups
    rewards = torch.randint(0, 2, (B,), generator=g).to(F64)
    if partial:  # partial credit (GUI rewards mix format and accuracy terms): rewards in {0, 1/4, 1/2}
        rewards = torch.randint(0, 3, (B,), generator=g).to(F64) / 4
    rewards[:G] = 0.0  # one all-wrong group: A = 0, nothing to scale
    mask = anchor_mask(B, T, g)
    group = torch.arange(n_groups).repeat_interleave(G)
    return batch_with_mask(rewards, group, mask), [f"uid{int(i)}" for i in group]


@pytest.mark.covers("gui-libra", "grpo")
@pytest.mark.parametrize("seed, partial", [(0, False), (1, False), (2, True), (3, True)])
def test_success_adaptive_advantage_matches_guilibra(seed, partial):
    batch, index = outcome_case(seed, partial=partial)
    ours = chain(batch)
    token_level_rewards = last_token_mask(batch.mask).to(F64) * batch.rewards[:, None]
    theirs, _ = compute_grpo_weighted_positive_negative(token_level_rewards, batch.mask, index)
    assert (ours < 0).any() and (ours > 0).any()
    torch.testing.assert_close(ours.to(F64), theirs, **AGREE_TOL)
    # the scaling bites: some negative advantage differs from plain GRPO's
    plain = registry.get("advantage", "grpo").fn(batch)
    assert ((ours - plain).abs() > 1e-3).any()


@pytest.mark.covers("gui-libra", "kl-penalty")
@pytest.mark.parametrize("seed", [0, 1])
def test_kl_trust_region_matches_easyr1_low_var_kl(seed):
    g = seeded(seed)
    B, T = 6, 8
    mask = anchor_mask(B, T, g)
    ref_logp = -torch.rand(B, T, generator=g, dtype=F64) * 3
    logp = (ref_logp + torch.randn(B, T, generator=g, dtype=F64) * 2.0).requires_grad_(True)
    kw = RECIPE.kl_term().kw
    ours, _ = kl_in_loss(logp, ref_logp, mask, beta=kw["beta"], estimator=kw["estimator"], agg=RECIPE.agg,
                         value_clamp=kw["value_clamp"])
    theirs = kw["beta"] * average_loss_token(compute_kl_low_var_kl(logp, ref_logp), mask)
    assert (compute_kl_low_var_kl(logp, ref_logp) * mask == 10.0).any()  # the value clamp is exercised
    assert_agree(ours, theirs, logp)


@pytest.mark.covers("gui-libra", "ppo-clip", "dual-clip")
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_policy_loss_matches_easyr1_default_loss(seed):
    g = seeded(seed)
    B, T = 8, 7
    mask = anchor_mask(B, T, g)
    old = -torch.rand(B, T, generator=g, dtype=F64) * 2
    logp = (old + torch.randn(B, T, generator=g, dtype=F64) * 0.8).requires_grad_(True)
    A = torch.randn(B, 1, generator=g, dtype=F64).expand(B, T) * mask
    kw = RECIPE.objective.kw
    ours, m = ppo_clip(logp, old, A, mask, agg=RECIPE.agg, **kw)
    theirs = compute_policy_loss_default(old, logp, A, mask, kw["eps_low"], kw["eps_high"], kw["dual_clip_c"])
    assert m["clip/dual"] > 0 and m["clip/region"] > 0  # both clips are exercised
    assert_agree(ours, theirs, logp)
