"""Group-relative advantages: GRPO (z-score, scales, Bessel factor) and RLOO (leave-one-out baseline)."""
import math

import pytest
import torch

from tests.helpers import GROUPS, REWARDS, make_batch, per_seq
from workbench import registry
from workbench.advantages.group import group_index, group_mean, group_stats, grpo, rloo
from workbench.batch import RolloutBatch
from workbench.recipes import get_recipe, with_overrides
from workbench.train.pipeline import Pipeline

G = 4


@pytest.mark.covers("grpo")
@pytest.mark.parametrize("unbiased", [True, False])
def test_grpo_is_a_group_z_score(unbiased):
    A = per_seq(grpo(make_batch(REWARDS, GROUPS), unbiased=unbiased, eps=0.0))
    for g in (0, 1):
        r = torch.tensor(REWARDS[4 * g:4 * g + 4], dtype=torch.float64)
        expected = (r - r.mean()) / r.std(unbiased=unbiased)
        assert torch.allclose(A[4 * g:4 * g + 4], expected)
        assert abs(A[4 * g:4 * g + 4].sum()) < 1e-12


@pytest.mark.covers("grpo")
def test_grpo_bessel_factor_and_affine_invariance():
    b = make_batch(REWARDS, GROUPS)
    ratio = per_seq(grpo(b, unbiased=False, eps=0)) / per_seq(grpo(b, unbiased=True, eps=0))
    assert torch.allclose(ratio, torch.full_like(ratio, (G / (G - 1)) ** 0.5))
    scaled = make_batch([3 * r + 7 for r in REWARDS], GROUPS)
    assert torch.allclose(per_seq(grpo(scaled, eps=0)), per_seq(grpo(b, eps=0)))


@pytest.mark.covers("grpo")
@pytest.mark.parametrize("eps_mode", ["add", "floor_add"])
def test_all_equal_group_gets_zero_advantage(eps_mode):
    A = grpo(make_batch([1.0, 1.0, 1.0, 0.0, 1.0, 0.0], [0, 0, 0, 1, 1, 1]), eps_mode=eps_mode)
    assert torch.all(A[:3] == 0) and torch.isfinite(A).all()


@pytest.mark.covers("grpo")
def test_grpo_scales():
    b = make_batch(REWARDS, GROUPS)
    none = per_seq(grpo(b, scale="none"))
    assert torch.allclose(none[:4], torch.tensor([0.5, -0.5, -0.5, 0.5], dtype=torch.float64))
    batch_std = torch.tensor(REWARDS, dtype=torch.float64).std()
    assert torch.allclose(per_seq(grpo(b, scale="batch", eps=0)), none / batch_std)


@pytest.mark.covers("grpo")
def test_advantage_is_broadcast_over_the_mask():
    A = grpo(make_batch([1.0, 0.0], [0, 0], lengths=[2, 4]))
    assert torch.all(A[0, 2:] == 0) and torch.all(A[1] == A[1, 0])


@pytest.mark.covers("rloo", "dr_grpo")
def test_rloo_equals_dr_grpo_scaled_by_g_over_g_minus_1():
    b = make_batch(REWARDS, GROUPS)
    assert torch.allclose(rloo(b), grpo(b, scale="none") * G / (G - 1))


@pytest.mark.covers("rloo")
def test_rloo_matches_the_explicit_leave_one_out_baseline():
    b = make_batch(REWARDS, GROUPS)
    r = torch.tensor(REWARDS, dtype=torch.float64)
    baseline = torch.stack([torch.cat([r[4 * (i // 4):i], r[i + 1:4 * (i // 4) + 4]]).mean() for i in range(8)])
    assert torch.allclose(per_seq(rloo(b)), r - baseline)


@pytest.mark.covers("grpo", "rloo")
@pytest.mark.parametrize("estimator", [grpo, rloo])
def test_group_of_one_and_nan_rewards_are_clear_errors(estimator):
    with pytest.raises(ValueError, match="group of one"):
        estimator(make_batch([1.0, 0.0, 1.0], [0, 0, 1]))
    A = estimator(make_batch([1.0, 0.0, 1.0], [0, 0, 1]), allow_singletons=True)
    assert torch.all(A[2] == 0)
    with pytest.raises(ValueError, match="NaN"):
        estimator(make_batch([1.0, float("nan")], [0, 0]))


@pytest.mark.covers("grpo", "kl-penalty")
def test_group_estimators_read_kl_in_reward_as_a_sequence_penalty():
    b = make_batch([1.0, 0.0], [0, 0], lengths=[2, 2], token_rewards=torch.tensor([[-0.1, -0.1], [0.0, -0.1]]))
    assert torch.allclose(per_seq(grpo(b, scale="none")), torch.tensor([0.45, -0.45], dtype=torch.float64))


# Equal rewards at every scale: a plain sequential sum of 16 copies of 1e4 pi is not 16 x 1e4 pi, which left a
# z-score ~1e-5 on an all-equal group (checked: grpo, gbpo, hapo, gigpo, ipa at G = 16, rloo at G = 3 before the fix).
SCALES = [10.0 ** p for p in range(7)]
VALUES = (math.pi, 1 / 3, 1.1)
SIZES = (2, 3, 7, 16)


def equal_groups(value, G, dtype):
    """Two all-equal groups of G rows (value and -value / 3), lengths 3 and 5 alternating (unequal weights)."""
    rewards = torch.tensor([value] * G + [-value / 3] * G, dtype=dtype)
    lengths = torch.tensor([3, 5] * G)
    mask = (torch.arange(5)[None, :] < lengths[:, None]).to(dtype)
    group = torch.arange(2).repeat_interleave(G)
    return RolloutBatch(response_ids=torch.zeros(mask.shape, dtype=torch.long), mask=mask, group=group,
                        rewards=rewards)


@pytest.mark.covers("grpo")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("G", SIZES)
def test_group_mean_and_std_of_equal_values_are_exactly_the_value_and_zero(G, dtype):
    for value in (scale * c for scale in SCALES for c in VALUES):
        batch = equal_groups(value, G, dtype)
        mean, std, sizes = group_stats(batch.rewards, batch.group)
        assert torch.equal(mean, batch.rewards) and torch.equal(std, torch.zeros_like(std)), value
        dense, counts = group_index(batch.group)
        weighted = group_mean(batch.rewards, dense, counts.shape[0], weights=batch.lengths)[dense]
        assert torch.equal(weighted, batch.rewards), value
        assert torch.equal(sizes, torch.full_like(sizes, G))


@pytest.mark.covers("grpo")
def test_group_mean_is_the_weighted_mean_and_a_weightless_group_gets_its_minimum():
    x = torch.tensor([1.0, 2.0, 4.0, 7.0, 5.0], dtype=torch.float64)
    dense = torch.tensor([0, 0, 0, 1, 1])
    assert torch.allclose(group_mean(x, dense, 2), torch.tensor([7 / 3, 6.0], dtype=torch.float64))
    w = torch.tensor([1.0, 0.0, 3.0, 0.0, 0.0], dtype=torch.float64)
    assert torch.allclose(group_mean(x, dense, 2, weights=w), torch.tensor([13 / 4, 5.0], dtype=torch.float64))


# every group-baseline advantage sharing `group_mean`, with the settings that change the centring or the scale
EXACT_CASES = [("grpo", {}), ("grpo", {"scale": "none"}), ("grpo", {"scale": "batch"}), ("grpo", {"unbiased": False}),
               ("grpo", {"eps_mode": "floor_add"}), ("rloo", {}), ("opo", {}), ("gpg", {}), ("gbpo", {}),
               ("hapo", {}), ("seeupo", {}), ("ipa", {}), ("gigpo", {}), ("gigpo", {"mode": "mean_norm"}),
               ("reinforce_plus_plus_baseline", {})]


@pytest.mark.covers("grpo", "rloo", "dr_grpo", "opo", "gpg", "gbpo", "hapo", "seeupo", "ipa", "gigpo",
                    "reinforce_plus_plus_baseline")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("G", SIZES)
@pytest.mark.parametrize("key,hp", EXACT_CASES)
def test_equal_rewards_give_exactly_zero_advantage_at_every_scale(key, hp, G, dtype):
    fn = registry.get("advantage", key).fn
    for value in (scale * c for scale in SCALES for c in VALUES):
        batch = equal_groups(value, G, dtype)
        A = fn(batch, **hp)
        assert torch.equal(A, torch.zeros_like(A)), (value, A.abs().max())
        if key == "gbpo":  # its target advantage centres on the median: exact already, kept so
            assert torch.equal(batch.target_adv, torch.zeros_like(batch.target_adv))


@pytest.mark.parametrize("overrides, message", [
    ({"scale": "grup"}, r"advantage 'grpo': scale='grup' is not one of \['group', 'batch', 'none'\] \(did you mean "
                        r"'group'\?\)"),
    ({"eps_mode": "floor"}, r"eps_mode='floor' is not one of \['add', 'floor_add'\]"),
    ({"token_rewards_mode": "togo"}, r"token_rewards_mode='togo' is not one of \['in_baseline', 'to_go'\]"),
])
def test_grpo_named_options_are_refused_when_the_recipe_is_built(overrides, message):
    """scale was checked only after the rewards were read: a 1-step run refused scale='' mid-training."""
    with pytest.raises(ValueError, match=message):
        Pipeline(with_overrides(get_recipe("accuracy-reward"), {"advantage:grpo": overrides}))
