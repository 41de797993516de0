"""Agreement with RL-PLUS's reference (YihongDong/RL-PLUS @ eb4aa4d, `rl_plus/verl/verl/recipe/rlplus_core_alg.py`),
transcribed in tests/anchors/formulas_rl_plus.py: advantages, loss values, gradients and logged metrics, float64,
random groups of G - 1 sampled rows plus one external row, right padding and interior holes in the masks.

The reference path is the released script's: `off_policy_strategy="RL-PLUS"`, `loss_remove_clip=True`,
`loss_remove_token_mean=True` (token sum / L), `grpo_use_std=False`, no off-policy clips, `target_probs=None`.
"""
import pytest
import torch

from tests.anchors import formulas_rl_plus as ref
from tests.helpers import D, anchor_mask, assert_agree, batch_with_mask, seeded
from workbench import ops
from workbench.advantages.rl_plus import rl_plus_advantage
from workbench.objectives.rl_plus import rl_plus

pytestmark = pytest.mark.covers("rl-plus")


def case(seed, G=4, groups=3, T=7, holes=True):
    """A batch whose every G-th row is external (offpolicy_mask = its mask), with the reference's inputs:
    token-level rewards on each row's last policy token, uid list, on-policy rows, prefix mask."""
    g = seeded(seed)
    B = G * groups
    mask = anchor_mask(B, T, g, holes=holes)
    rewards = (torch.rand(B, generator=g) < 0.5).to(D) + 0.25 * (torch.rand(B, generator=g) < 0.3).to(D)
    external = torch.zeros(B, dtype=torch.bool)
    external[G - 1::G] = True
    group = torch.arange(groups).repeat_interleave(G)
    offpolicy_mask = mask * external[:, None].to(D)
    batch = batch_with_mask(rewards, group, mask, offpolicy_mask=offpolicy_mask)
    token_level_rewards = torch.zeros(B, T, dtype=D)
    last = (mask * torch.arange(1, T + 1)).argmax(-1)
    token_level_rewards[torch.arange(B), last] = rewards
    return batch, token_level_rewards, group.tolist(), ~external, offpolicy_mask > 0


def policy(batch, seed, scale=0.6):
    """old log-probs and a log-prob leaf moved away from them, both < 0 (the reference's (1 - p)^0.5 needs p <= 1)."""
    g = seeded(100 + seed)
    B, T = batch.mask.shape
    old = -3.0 * torch.rand(B, T, generator=g, dtype=D) - 1e-3
    logp = (old + scale * torch.randn(B, T, generator=g, dtype=D)).clamp(max=-1e-3)
    return logp.requires_grad_(True), old


@pytest.mark.parametrize("holes", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_on_policy_baseline_matches_grpo_split(seed, holes):
    batch, tlr, index, on_policy, _ = case(seed, holes=holes)
    theirs = ref.compute_grpo_outcome_advantage_split(tlr.clone(), batch.mask, index, on_policy, use_std=False)
    assert_agree(rl_plus_advantage(batch), theirs)


@pytest.mark.parametrize("seed", range(3))
def test_all_rows_baseline_matches_the_scripts_grpo(seed):
    """`algorithm.adv_estimator=grpo` (train_RL-PLUS.sh L30): verl's GRPO over all the prompt's rows, the
    demonstration included."""
    batch, tlr, index, _, _ = case(seed)
    theirs = ref.compute_grpo_outcome_advantage(tlr.clone(), batch.mask, index, use_std=False)
    assert_agree(rl_plus_advantage(batch, baseline_rows="all"), theirs)


def test_one_on_policy_row_keeps_the_references_zero_baseline():
    """G = 2 (one sample + the reference): the reference's baseline is 0, so A = R; ours with
    allow_singletons="keep"."""
    batch, tlr, index, on_policy, _ = case(5, G=2, groups=4)
    theirs = ref.compute_grpo_outcome_advantage_split(tlr.clone(), batch.mask, index, on_policy, use_std=False)
    assert_agree(rl_plus_advantage(batch, allow_singletons="keep"), theirs)
    assert torch.equal(theirs[:, 0], batch.rewards * batch.mask[:, 0])


@pytest.mark.parametrize("holes", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_loss_gradient_and_metrics_match_compute_token_on_off_policy_loss(seed, holes):
    """Advantage then loss, each side on its own advantage; our seq-mean-token-sum-norm with C = L is their
    `loss_remove_token_mean=True` (sum / eos_mask.shape[-1]) on one micro-batch."""
    batch, tlr, index, on_policy, prefix_mask = case(seed, holes=holes)
    logp, old = policy(batch, seed)
    T = batch.mask.shape[1]
    their_adv = ref.compute_grpo_outcome_advantage_split(tlr.clone(), batch.mask, index, on_policy, use_std=False)
    theirs = ref.compute_token_on_off_policy_loss(old, logp, their_adv, batch.mask, 0.2, 1.0, prefix_mask,
                                                  off_policy_strategy="RL-PLUS", loss_remove_token_mean=True,
                                                  loss_remove_clip=True)
    ours, m = rl_plus(logp, old, rl_plus_advantage(batch), batch.mask, offpolicy_mask=batch.offpolicy_mask,
                      agg="seq-mean-token-sum-norm", denom=ops.Denominators(norm_constant=float(T)))
    assert_agree(ours, theirs["pg_loss"], logp)
    assert m["rlplus/off_ratio"] == pytest.approx(theirs["off_ratio_mean"].item(), rel=1e-12)
    assert m["shaping/offpolicy_prob"] == pytest.approx(theirs["off_policy_prob"].item(), rel=1e-12)
    # and their token-mean aggregation (loss_remove_token_mean=False) is our token-mean
    theirs_mean = ref.compute_token_on_off_policy_loss(old, logp, their_adv, batch.mask, 0.2, 1.0, prefix_mask,
                                                       off_policy_strategy="RL-PLUS", loss_remove_clip=True)
    assert_agree(rl_plus(logp, old, rl_plus_advantage(batch), batch.mask, offpolicy_mask=batch.offpolicy_mask)[0],
                 theirs_mean["pg_loss"], logp)


@pytest.mark.parametrize("seed", range(3))
def test_no_reshape_strategy_matches(seed):
    batch, _, _, _, prefix_mask = case(seed)
    logp, old = policy(batch, seed)
    adv = rl_plus_advantage(batch)
    theirs = ref.compute_token_on_off_policy_loss(old, logp, adv, batch.mask, 0.2, 1.0, prefix_mask,
                                                  off_policy_strategy="no_reshape", loss_remove_clip=True)
    ours, m = rl_plus(logp, old, adv, batch.mask, offpolicy_mask=batch.offpolicy_mask, off_ratio="no_reshape")
    assert_agree(ours, theirs["pg_loss"], logp)
    assert m["rlplus/off_ratio"] == pytest.approx(theirs["off_ratio_mean"].item(), rel=1e-12)


def test_a_batch_without_external_rows():
    """Their off-policy means are 0/0 (NaN, reported as 0); the loss is the on-policy one on both sides."""
    batch, tlr, index, _, _ = case(2)
    logp, old = policy(batch, 2)
    none = torch.zeros_like(batch.mask, dtype=torch.bool)
    adv = ref.compute_grpo_outcome_advantage(tlr.clone(), batch.mask, index, use_std=False)
    theirs = ref.compute_token_on_off_policy_loss(old, logp, adv, batch.mask, 0.2, 1.0, none,
                                                  off_policy_strategy="RL-PLUS", loss_remove_clip=True)
    ours, m = rl_plus(logp, old, adv, batch.mask, offpolicy_mask=torch.zeros_like(batch.mask))
    assert_agree(ours, theirs["pg_loss"], logp)
    assert theirs["off_ratio_mean"].item() == m["rlplus/off_ratio"] == 0.0
    assert theirs["off_policy_prob"].item() == m["shaping/offpolicy_prob"] == 0.0


def test_a_group_without_on_policy_rows_fails_in_both_ours_with_the_reason():
    """The reference's ValueError("no score in prompt index") cannot fire: the group never enters id2score, and its
    external row then fails with a KeyError. Ours refuses it with a ValueError that says why."""
    batch, tlr, index, on_policy, _ = case(0, G=4, groups=2)
    on_policy[4:] = False
    batch.offpolicy_mask[4:] = batch.mask[4:]
    with pytest.raises(KeyError):
        ref.compute_grpo_outcome_advantage_split(tlr.clone(), batch.mask, index, on_policy, use_std=False)
    with pytest.raises(ValueError, match=r"groups \[1\] hold only external rows"):
        rl_plus_advantage(batch)
