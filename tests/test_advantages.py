import pytest
import torch

from tests.helpers import make_batch
from workbench import ops, registry
from workbench.advantages.gae import gae, gae_and_returns, gae_returns
from workbench.advantages.group import grpo, rloo
from workbench.advantages.reinforce import discounted_returns, reinforce_plus_plus

G = 4
REWARDS = [1.0, 0.0, 0.0, 1.0, 0.5, 0.2, 0.9, 0.1]
GROUPS = [0, 0, 0, 0, 1, 1, 1, 1]


def per_seq(adv):
    return adv[:, 0]


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


@pytest.mark.covers("reinforce_plus_plus")
def test_reinforce_plus_plus_whitens_discounted_returns():
    b = make_batch([1.0, 0.0, 2.0], [0, 1, 2], lengths=[3, 2, 4])
    A = reinforce_plus_plus(b, eps=0.0)
    assert ops.masked_mean(A, b.mask).abs() < 1e-12
    assert ops.masked_var(A, b.mask).item() == pytest.approx(1.0)
    assert torch.allclose(A[0, :3], A[0, 0].expand(3))  # gamma = 1, one terminal reward: constant per row
    # Bessel (verl) vs population (OpenRLHF) differ exactly by sqrt(n / (n - 1)).
    n = b.mask.sum()
    ratio = reinforce_plus_plus(b, unbiased=False, eps=0) / reinforce_plus_plus(b, unbiased=True, eps=0)
    assert torch.allclose(ratio[b.mask > 0], torch.sqrt(n / (n - 1)).expand(int(n)))


@pytest.mark.covers("reinforce_plus_plus")
def test_discounted_returns():
    r = torch.tensor([[0.0, 0.0, 1.0]], dtype=torch.float64)
    out = discounted_returns(r, torch.ones_like(r), gamma=0.5)
    assert torch.allclose(out, torch.tensor([[0.25, 0.5, 1.0]], dtype=torch.float64))


def critic_batch(lengths=(3, 4), seed=0):
    g = torch.Generator().manual_seed(seed)
    b = make_batch([1.0, -0.5], [0, 1], lengths=list(lengths))
    b.values = torch.randn(b.mask.shape, generator=g, dtype=torch.float64) * b.mask
    return b


@pytest.mark.covers("gae")
def test_gae_lambda_one_is_return_minus_value_and_lambda_zero_is_td_error():
    b = critic_batch()
    from workbench.advantages.base import token_rewards

    r, V, m = token_rewards(b), b.values, b.mask
    a1, _ = gae_and_returns(r, V, m, gamma=0.9, lam=1.0)
    assert torch.allclose(a1, discounted_returns(r, m, 0.9) - V * m)
    a0, _ = gae_and_returns(r, V, m, gamma=0.9, lam=0.0)
    next_v = torch.cat([V[:, 1:], torch.zeros(2, 1, dtype=V.dtype)], 1) * torch.cat([m[:, 1:], torch.zeros(2, 1)], 1)
    assert torch.allclose(a0, (r + 0.9 * next_v - V) * m)


@pytest.mark.covers("gae")
def test_gae_with_zero_values_is_reward_to_go_and_skips_observation_tokens():
    b = critic_batch()
    b.values = torch.zeros_like(b.values)
    from workbench.advantages.base import token_rewards

    adv, ret = gae_and_returns(token_rewards(b), b.values, b.mask, 1.0, 1.0)
    assert torch.allclose(adv[0, :3], torch.ones(3, dtype=torch.float64)) and torch.allclose(ret, adv)
    # Inserting a masked observation token in the middle leaves policy-token advantages unchanged.
    b2 = critic_batch()
    gapped_mask = torch.tensor([[1, 0, 1, 1, 0], [1, 1, 1, 1, 0]], dtype=torch.float64)
    gapped_v = torch.zeros(2, 5, dtype=torch.float64)
    gapped_v[0, [0, 2, 3]], gapped_v[1, :4] = b2.values[0, :3], b2.values[1]
    r2 = torch.zeros(2, 5, dtype=torch.float64)
    r2[0, 3], r2[1, 3] = 1.0, -0.5
    gapped, _ = gae_and_returns(r2, gapped_v, gapped_mask, 0.9, 0.95)
    plain, _ = gae_and_returns(token_rewards(b2), b2.values, b2.mask, 0.9, 0.95)
    assert torch.allclose(gapped[0, [0, 2, 3]], plain[0, :3])


@pytest.mark.covers("gae", "value-loss")
def test_gae_whitening_and_returns():
    b = critic_batch()
    A = gae(b)
    assert ops.masked_mean(A, b.mask).abs() < 1e-6
    raw, ret = gae_and_returns(__import__("workbench.advantages.base", fromlist=["x"]).token_rewards(b),
                               b.values, b.mask, 1.0, 0.95)
    assert torch.allclose(gae_returns(b), ret) and torch.allclose(ret, (raw + b.values) * b.mask)
    with pytest.raises(ValueError, match="values"):
        gae(make_batch([1.0], [0]))


@pytest.mark.filterwarnings("ignore:gigpo called without anchor")
def test_every_registered_advantage_has_the_uniform_signature():
    b = critic_batch()
    b.rewards = torch.tensor([1.0, 0.0], dtype=torch.float64)
    b.group = torch.tensor([0, 0])
    b.baseline_rewards = torch.tensor([0.5, 0.5], dtype=torch.float64)  # ReMax's greedy-rollout reward
    b.truncated = torch.tensor([False, True])  # T-PPO's unfinished rows
    for entry in registry.entries("advantage"):
        A = entry.fn(b)
        assert A.shape == b.mask.shape and torch.all(A[b.mask == 0] == 0), entry.key
