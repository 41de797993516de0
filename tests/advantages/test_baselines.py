"""F1 critic-free baselines: REINFORCE++-baseline, ReMax, OPO, GPG."""
import pytest
import torch

from tests.helpers import GROUPS, LENGTHS, REWARDS, make_batch, per_seq
from workbench import ops, registry
from workbench.advantages.baselines import degenerate_groups, gpg, gpg_alpha, opo, reinforce_plus_plus_baseline, remax
from workbench.advantages.group import grpo
from workbench.advantages.reinforce import reinforce_plus_plus
from workbench.recipes import get_recipe, with_overrides
from workbench.train.pipeline import Pipeline


@pytest.mark.covers("reinforce_plus_plus_baseline", "gpg", "opo", "remax")
def test_registered_with_equations_and_defaults():
    for key, defaults in [("reinforce_plus_plus_baseline", {"unbiased": True, "eps": 1e-8}),
                          ("remax", {}), ("opo", {"allow_singletons": False}),
                          ("gpg", {"alpha_mode": "paper", "f_norm": 1.0})]:
        entry = registry.get("advantage", key)
        assert entry.equation and entry.fn.__doc__
        assert defaults.items() <= entry.defaults.items()


# ---------------------------------------------------------------- reinforce_plus_plus_baseline

@pytest.mark.covers("reinforce_plus_plus_baseline")
@pytest.mark.parametrize("unbiased", [True, False])
def test_rpp_baseline_is_dr_grpo_then_token_whitening(unbiased):
    b = make_batch(REWARDS, GROUPS, LENGTHS)
    A = reinforce_plus_plus_baseline(b, unbiased=unbiased)
    expected = ops.masked_whiten(grpo(b, scale="none"), b.mask, unbiased=unbiased)
    assert torch.allclose(A, expected, atol=1e-12)
    assert abs(ops.masked_mean(A, b.mask)) < 1e-12
    assert float(ops.masked_var(A, b.mask, unbiased)) == pytest.approx(1.0, abs=1e-6)
    assert torch.all(A[b.mask == 0] == 0)


@pytest.mark.covers("reinforce_plus_plus_baseline")
def test_rpp_baseline_all_equal_group_gets_minus_mean_over_std():
    rewards, groups, lengths = [1.0, 1.0, 1.0, 1.0, 0.0, 0.0], [0, 0, 0, 1, 1, 1], [2, 3, 4, 1, 5, 3]
    b = make_batch(rewards, groups, lengths)
    centered = grpo(b, scale="none")
    assert torch.all(centered[:3] == 0)
    mu, var = ops.masked_mean(centered, b.mask), ops.masked_var(centered, b.mask)
    A = reinforce_plus_plus_baseline(b)
    expected = -mu / torch.sqrt(var + 1e-8)
    assert abs(float(expected)) > 0.1  # documented: not 0 when lengths differ
    assert torch.allclose(A[:3][b.mask[:3] > 0], expected.expand(9))


@pytest.mark.covers("reinforce_plus_plus_baseline")
def test_rpp_baseline_batch_affine_invariance():
    b = make_batch(REWARDS, GROUPS, LENGTHS)
    moved = make_batch([3.0 * r - 7.0 for r in REWARDS], GROUPS, LENGTHS)
    assert torch.allclose(reinforce_plus_plus_baseline(moved), reinforce_plus_plus_baseline(b), atol=1e-7)


@pytest.mark.covers("reinforce_plus_plus_baseline")
def test_rpp_baseline_one_group_of_equal_lengths_equals_reinforce_pp_with_centering_removed():
    # With one group and equal lengths, centering is absorbed by whitening: equals REINFORCE++ (gamma = 1).
    b = make_batch(REWARDS[:4], GROUPS[:4], [3] * 4)
    assert torch.allclose(reinforce_plus_plus_baseline(b), reinforce_plus_plus(b), atol=1e-12)


# ---------------------------------------------------------------- remax

@pytest.mark.covers("remax")
def test_remax_sampled_equal_to_greedy_gives_zero():
    b = make_batch(REWARDS, GROUPS, LENGTHS, baseline_rewards=torch.tensor(REWARDS, dtype=torch.float64))
    assert torch.all(remax(b) == 0)


@pytest.mark.covers("remax")
def test_remax_terminal_reward_gives_r_minus_greedy_on_every_token():
    greedy = torch.tensor([0.5, 1.0, 0.0, 0.3, 0.2, 0.2, 1.0, -1.0], dtype=torch.float64)
    b = make_batch(REWARDS, GROUPS, LENGTHS, baseline_rewards=greedy)
    A = remax(b)
    diff = torch.tensor(REWARDS, dtype=torch.float64) - greedy
    assert torch.allclose(A, diff[:, None] * b.mask)


@pytest.mark.covers("remax")
def test_remax_token_rewards_give_reward_to_go():
    b = make_batch([1.0, 0.0], [0, 0], [3, 2], baseline_rewards=torch.tensor([0.25, 0.5], dtype=torch.float64))
    b.token_rewards = torch.tensor([[0.1, 0.2, 0.3], [0.4, 0.5, 9.0]], dtype=torch.float64)  # 9.0 is padding
    expected = torch.tensor([[1.6 - 0.25, 1.5 - 0.25, 1.3 - 0.25], [0.9 - 0.5, 0.5 - 0.5, 0.0]], dtype=torch.float64)
    assert torch.allclose(remax(b), expected)
    with pytest.raises(ValueError, match="baseline_rewards"):
        remax(make_batch([1.0, 0.0], [0, 0]))


# ---------------------------------------------------------------- opo

@pytest.mark.covers("opo")
def test_opo_equal_lengths_is_dr_grpo():
    b = make_batch(REWARDS, GROUPS, [4] * 8)
    assert torch.allclose(opo(b), grpo(b, scale="none"), atol=1e-12)


@pytest.mark.covers("opo")
def test_opo_length_weighted_advantages_sum_to_zero():
    b = make_batch(REWARDS, GROUPS, LENGTHS)
    A = per_seq(opo(b))
    r, L = torch.tensor(REWARDS, dtype=torch.float64), torch.tensor(LENGTHS, dtype=torch.float64)
    for g in (slice(0, 4), slice(4, 8)):
        assert abs(float((L[g] * A[g]).sum())) < 1e-12
        assert torch.allclose(A[g], r[g] - (L[g] * r[g]).sum() / L[g].sum())
    with pytest.raises(ValueError, match="group of one"):
        opo(make_batch([1.0, 0.0, 1.0], [0, 0, 1]))
    assert torch.all(opo(make_batch([1.0, 0.0, 1.0], [0, 0, 1]), allow_singletons=True)[2] == 0)


@pytest.mark.covers("opo")
def test_opo_keeps_a_singletons_reward_with_allow_singletons_keep():
    """verl's OPO gives a group of one the baseline 0: rewards [0, 1, 5], groups [0, 0, 1] -> [-0.5, 0.5, 5]."""
    A = per_seq(opo(make_batch([0.0, 1.0, 5.0], [0, 0, 1]), allow_singletons="keep"))
    assert A.tolist() == [-0.5, 0.5, 5.0]


# ---------------------------------------------------------------- gpg

@pytest.mark.covers("gpg")
def test_gpg_without_degenerate_groups_is_dr_grpo():
    b = make_batch(REWARDS, GROUPS, LENGTHS)
    assert gpg_alpha(b) == 1.0
    assert torch.allclose(gpg(b), grpo(b, scale="none"))


@pytest.mark.covers("gpg")
def test_gpg_alpha_on_a_mixed_batch():
    rewards = [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.3, 0.7, 0.0, 0.0]
    groups = [0, 0, 0, 1, 1, 1, 2, 2, 3, 3]   # groups 0 and 3 are all-equal: M = 5, B = 10
    b = make_batch(rewards, groups)
    assert degenerate_groups(b.rewards, b.group).tolist() == [True] * 3 + [False] * 5 + [True] * 2
    assert gpg_alpha(b) == pytest.approx(10 / 5)
    A = gpg(b)
    assert torch.allclose(A, 2.0 * grpo(b, scale="none"))
    assert torch.all(A[[0, 1, 2, 8, 9]] == 0)
    # verl counts nonzero rewards: 6 of 10.
    assert gpg_alpha(b, "verl") == pytest.approx(10 / 6)
    assert torch.allclose(gpg(b, alpha_mode="verl", f_norm=2.0), grpo(b, scale="none") * (10 / 6) / 2.0)


@pytest.mark.covers("gpg")
def test_gpg_singletons_count_in_m_unless_kept():
    """[1, 1] all-equal, [0.3, 0.7] informative, [2] and [0] groups of one. True: the singletons' A = 0, so they
    dilute like the all-equal group (M = 4, alpha = 6/2); "keep": A = R (verl's mean 0), M = 2, alpha = 6/4."""
    b = make_batch([1.0, 1.0, 0.3, 0.7, 2.0, 0.0], [0, 0, 1, 1, 2, 3])
    dr_grpo = per_seq(grpo(b, scale="none", allow_singletons=True))
    assert torch.allclose(per_seq(gpg(b, allow_singletons=True)), 3.0 * dr_grpo)
    kept = per_seq(gpg(b, allow_singletons="keep"))
    expected = 1.5 * torch.tensor([0.0, 0.0, -0.2, 0.2, 2.0, 0.0], dtype=torch.float64)
    assert torch.allclose(kept, expected)


@pytest.mark.covers("gpg")
def test_gpg_all_degenerate_gives_zero_without_division_by_zero():
    b = make_batch([1.0, 1.0, 0.0, 0.0], [0, 0, 1, 1])
    assert gpg_alpha(b) == 1.0
    A = gpg(b)
    assert torch.isfinite(A).all() and torch.all(A == 0)
    assert gpg_alpha(make_batch([0.0, 0.0], [0, 0]), "verl") == 2.0  # verl clamps the count at 1


@pytest.mark.covers("gpg")
def test_gpg_gradient_is_alpha_times_group_baseline_reinforce():
    b = make_batch([1.0, 1.0, 1.0, 0.0, 1.0, 0.0], [0, 0, 0, 1, 1, 1], [2, 3, 1, 2, 2, 3])
    logp = torch.randn(b.mask.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    logp.requires_grad_(True)
    (-(gpg(b) * logp * b.mask).sum()).backward()
    grad_gpg = logp.grad.clone()
    logp.grad = None
    (-(grpo(b, scale="none") * logp * b.mask).sum()).backward()
    assert torch.allclose(grad_gpg, 2.0 * logp.grad)


@pytest.mark.covers("gpg")
def test_degenerate_groups_is_exact_for_rounded_equal_rewards():
    r = torch.tensor([0.1, 0.1, 0.1, 0.3, 0.1], dtype=torch.float64)
    assert degenerate_groups(r, torch.tensor([0, 0, 0, 1, 1])).tolist() == [True, True, True, False, False]


@pytest.mark.parametrize("overrides, message", [
    ({"f_norm": 0}, r"advantage 'gpg': f_norm \(GPG's divisor of the advantage\) must be > 0, got 0"),
    ({"alpha_mode": "verl2"}, r"alpha_mode='verl2' is not one of \['paper', 'verl'\]"),
])
def test_gpg_settings_are_refused_when_the_recipe_is_built(overrides, message):
    """f_norm = 0 divided by zero in the first step's advantage."""
    with pytest.raises(ValueError, match=message):
        Pipeline(with_overrides(get_recipe("gpg"), {"advantage:gpg": overrides}))
