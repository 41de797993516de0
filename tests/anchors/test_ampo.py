"""Agreement with AMPO's reference (SII-Enigma/AMPO @ b88d365), transcribed in tests/anchors/formulas_ampo.py: the
on-policy-only advantage and the script's all-rows one, the prefix weights, the injection decision, the comprehension
score (`mean_exp_log_softmax`, the shaped score, the best-k order), the forced teacher reward, and the loss with the
released script's settings; float64, random groups with teacher rows, right padding and interior holes in the masks.
"""
import random

import pytest
import torch

from tests.anchors import formulas_ampo as ref
from tests.helpers import D, anchor_mask, assert_agree, batch_with_mask, seeded
from workbench import ops
from workbench.advantages.ampo import ampo_advantage, prefix_weights
from workbench.objectives.policy_shaping import policy_shaping
from workbench.transforms.ampo import (best_k, comprehension_score, correct_rows, groups_to_guide,
                                       mean_answer_probability)

pytestmark = pytest.mark.covers("ampo")


def case(seed, G=6, groups=4, T=7, k=2, holes=True):
    """A batch of `groups` groups of G rows: in each group but the last the first k rows are teacher rows
    (offpolicy_mask = their mask, reward 1); on-policy rewards random in {0, 0.5, 1, 1.5} (a group may be all equal).
    Returns the batch and the reference's inputs (`inputs`)."""
    g = seeded(seed)
    B = G * groups
    mask = anchor_mask(B, T, g, holes=holes)
    rewards = (torch.rand(B, generator=g) < 0.4).to(D) + 0.5 * (torch.rand(B, generator=g) < 0.2).to(D)
    teacher = torch.zeros(B, dtype=torch.bool)
    for start in range(0, G * (groups - 1), G):
        teacher[start:start + k] = True
    rewards[teacher] = 1.0
    batch = batch_with_mask(rewards, torch.arange(groups).repeat_interleave(G), mask,
                            offpolicy_mask=mask * teacher[:, None].to(D))
    return (batch, *inputs(batch))


def inputs(batch):
    """The reference's inputs for `batch`: token-level rewards on each row's last policy token, the uid list, the
    on-policy rows (~prefix_mask.any(-1)) and the prefix mask."""
    B, T = batch.mask.shape
    token_level_rewards = torch.zeros(B, T, dtype=D)
    last = (batch.mask * torch.arange(1, T + 1)).argmax(-1)
    token_level_rewards[torch.arange(B), last] = batch.rewards
    prefix_mask = batch.offpolicy_mask > 0
    return token_level_rewards, batch.group.tolist(), ~prefix_mask.any(-1), prefix_mask


@pytest.mark.parametrize("norm_by_std", [True, False])
@pytest.mark.parametrize("holes", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_on_policy_advantage_matches_grpo_split(seed, holes, norm_by_std):
    batch, tlr, index, on_policy, _ = case(seed, holes=holes)
    theirs, _ = ref.compute_grpo_outcome_advantage_split(tlr.clone(), batch.mask, index, on_policy,
                                                         norm_adv_by_std_in_grpo=norm_by_std)
    assert_agree(ampo_advantage(batch, norm_by_std=norm_by_std), theirs)


def test_a_guided_group_matches_grpo_split_where_std_zero_becomes_one():
    """On-policy rewards all 0 (a guided group): their std 0 -> 1 gives each teacher (1 - 0) / (1 + eps), not 1 / eps,
    and the on-policy rows 0."""
    batch, *_ = case(0, G=4, groups=2, k=2)
    batch.rewards = (batch.offpolicy_mask.sum(-1) > 0).to(D)
    tlr, index, on_policy, _ = inputs(batch)
    theirs, _ = ref.compute_grpo_outcome_advantage_split(tlr.clone(), batch.mask, index, on_policy)
    ours = ampo_advantage(batch)
    assert_agree(ours, theirs)
    assert ours[:2, 0].tolist() == [1 / (1 + 1e-6)] * 2 and (ours[2:] == 0).all()


@pytest.mark.parametrize("norm_by_std", [True, False])
@pytest.mark.parametrize("seed", range(3))
def test_all_rows_baseline_matches_the_scripts_grpo(seed, norm_by_std):
    """`algorithm.adv_estimator=grpo` (train_ampo.sh L46, L95): verl's GRPO over all the prompt's rows, teachers
    included; the script's norm_adv_by_std_in_grpo=False (L113) is norm_by_std=False."""
    batch, tlr, index, _, _ = case(seed)
    theirs, _ = ref.compute_grpo_outcome_advantage(tlr.clone(), batch.mask, index,
                                                   norm_adv_by_std_in_grpo=norm_by_std)
    assert_agree(ampo_advantage(batch, baseline_rows="all", norm_by_std=norm_by_std), theirs)


def test_one_on_policy_row_keeps_the_references_mean_zero_std_one():
    """k = G - 1: one on-policy row per guided group; theirs is mean 0, std 1 (A = R / (1 + eps)), ours 'keep'."""
    batch, tlr, index, on_policy, _ = case(5, G=3, groups=3, k=2)
    theirs, _ = ref.compute_grpo_outcome_advantage_split(tlr.clone(), batch.mask, index, on_policy)
    assert_agree(ampo_advantage(batch), theirs)


@pytest.mark.parametrize("seed", range(3))
def test_prefix_weights_match_the_trainers_alpha_beta(seed):
    batch, tlr, index, on_policy, prefix_mask = case(seed)
    adv, _ = ref.compute_grpo_outcome_advantage_split(tlr.clone(), batch.mask, index, on_policy)
    theirs = ref.prefix_weighted_advantages(adv, prefix_mask, 0.7, 1.3)
    assert_agree(ampo_advantage(batch, alpha=0.7, beta=1.3), theirs)
    assert_agree(prefix_weights(batch.offpolicy_mask, 0.7, 1.3),  # theirs in float32
                 ref.prefix_weighted_advantages(torch.ones_like(adv), prefix_mask, 0.7, 1.3))


@pytest.mark.parametrize("seed", range(5))
def test_injection_decision_matches_the_trainers(seed):
    """Scores from {0, 0.1, 0.6, 0.61, 1, 1.1} (format 0.1 and correctness 1 as the reference's rewards add them):
    the groups we guide are exactly those the reference injects into, with the same correct rows."""
    rng = random.Random(seed)
    n, groups, c = 8, 12, 0.1
    scores = torch.tensor([rng.choice([0.0, 0.1, 0.6, 0.61, 1.0, 1.1]) if rng.random() < 0.3 else rng.choice([0.0, 0.1])
                           for _ in range(n * groups)], dtype=D)
    reward_tensor = torch.zeros(n * groups, 5, dtype=D)
    reward_tensor[:, 3] = scores
    group = torch.arange(groups).repeat_interleave(n)
    theirs = [ref.injection_decision(reward_tensor, i * n, n, c) for i in range(groups)]
    assert groups_to_guide(scores, group, c) == [i for i, (needs, _, _) in enumerate(theirs) if needs]
    correct = correct_rows(scores, c).reshape(groups, n)
    assert [torch.nonzero(row).flatten().tolist() for row in correct] == [pos for _, pos, _ in theirs]
    assert 0 < len(groups_to_guide(scores, group, c)) < groups


@pytest.mark.parametrize("seed", range(4))
def test_mean_answer_probability_matches_compute_score_b(seed):
    """Theirs rounds the float32 mean to bfloat16 (prob.py L332); ours keeps float64: equal to bf16 precision, and
    both 0 for a row without answer tokens."""
    g = seeded(seed)
    logp = -3 * torch.rand(5, 9, generator=g, dtype=D)
    mask = (torch.rand(5, 9, generator=g) < 0.5).to(D)
    mask[0] = 0.0
    ours = mean_answer_probability(logp, mask)
    theirs = torch.tensor([ref.compute_scoreB(logp[i], mask[i]) for i in range(5)], dtype=D)
    torch.testing.assert_close(ours, theirs, rtol=2 ** -8, atol=0)
    assert ours[0].item() == theirs[0].item() == 0.0


@pytest.mark.parametrize("seed", range(4))
def test_score_and_best_k_match_the_prob_reward_and_the_sort(seed):
    """score = 0.9 threshold_0(B - A) + 0.1 format, then the first effective_k of a descending sort (distinct scores:
    their argsort is not stable, so ties have no reference order)."""
    rng = random.Random(seed)
    m, c = 6, 0.1
    a = torch.tensor([rng.random() for _ in range(m)], dtype=D)
    b = torch.tensor([rng.random() for _ in range(m)], dtype=D)
    fmt = torch.tensor([float(rng.random() < 0.7) for _ in range(m)], dtype=D)
    ours = comprehension_score(b, a, fmt, c)
    theirs = torch.tensor([ref.prob_score(a[i].item(), b[i].item(), fmt[i].item(), c) for i in range(m)], dtype=D)
    assert_agree(ours, theirs)
    assert (theirs[b < a] == c * fmt[b < a]).all()  # threshold_0: a negative gain counts as 0
    rm_scores = torch.zeros(m, 4, dtype=D)
    rm_scores[:, 2] = theirs
    for k in (1, 2, 4):
        assert best_k(ours, k) == ref.kept_targets(rm_scores, k).tolist()


def test_forced_teacher_reward_is_max_of_score_and_one():
    for score, forced in [(0.0, 1.0), (0.6, 1.0), (1.0, 1.0), (1.1, 1.1)]:
        row = torch.zeros(6, dtype=D)
        row[3] = score
        _, total = ref.forced_teacher_reward(row, 4)
        assert total == pytest.approx(forced) == max(score, 1.0)


@pytest.mark.parametrize("scale", [0.6, 3.0])
@pytest.mark.parametrize("holes", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_loss_gradient_and_metrics_match_the_scripts_seq_loss(seed, holes, scale):
    """policy-shaping with dual_clip_c = 10 and seq-mean-token-sum-norm (C = L) is their
    `compute_token_on_seq_off_policy_loss` with the script's settings (p_div_p_0.1, clip 0.2 / 0.2, clip_ratio_c 10,
    loss_remove_token_mean=True) on one micro-batch; both sides on their own advantages. scale 3 moves log-probs far
    enough that the dual clip (r > 10 with A < 0) binds on some sampled tokens."""
    batch, tlr, index, on_policy, prefix_mask = case(seed, holes=holes)
    g = seeded(100 + seed)
    B, T = batch.mask.shape
    old = -6.0 * torch.rand(B, T, generator=g, dtype=D) - 1e-3
    logp = (old + scale * torch.randn(B, T, generator=g, dtype=D)).clamp(max=-1e-3).requires_grad_(True)
    their_adv, _ = ref.compute_grpo_outcome_advantage_split(tlr.clone(), batch.mask, index, on_policy)
    dual = (torch.exp(logp - old) > 10) & (their_adv < 0) & ~prefix_mask & (batch.mask > 0)
    assert bool(dual.any()) or scale < 1
    theirs = ref.compute_token_on_seq_off_policy_loss(old, logp, their_adv, batch.mask, prefix_mask,
                                                      config=ref.SCRIPT_LOSS_CONFIG)
    ours, m = policy_shaping(logp, old, ampo_advantage(batch), batch.mask, offpolicy_mask=batch.offpolicy_mask,
                             agg="seq-mean-token-sum-norm", denom=ops.Denominators(norm_constant=float(T)),
                             dual_clip_c=10.0)
    assert_agree(ours, theirs["pg_loss"], logp)
    # the logged teacher probability differs in kind: theirs averages per-teacher-row means ('seq' impl), ours is
    # the mean over all teacher tokens (LUFFY's off_policy_prob)
    per_row = [ref.masked_mean(torch.exp(logp[i]), batch.offpolicy_mask[i]) for i in range(B) if prefix_mask[i].any()]
    assert theirs["off_policy_prob"].item() == pytest.approx(torch.stack(per_row).mean().item(), rel=1e-9)
    assert m["shaping/offpolicy_prob"] == pytest.approx(
        ((torch.exp(logp) * batch.offpolicy_mask).sum() / batch.offpolicy_mask.sum()).item(), rel=1e-12)


def test_a_group_without_on_policy_rows_fails_in_both_ours_with_the_reason():
    batch, tlr, index, on_policy, _ = case(0, G=2, groups=2, k=2)
    with pytest.raises(KeyError):
        ref.compute_grpo_outcome_advantage_split(tlr.clone(), batch.mask, index, on_policy)
    with pytest.raises(ValueError, match=r"groups \[0\] hold only teacher rows"):
        ampo_advantage(batch)
