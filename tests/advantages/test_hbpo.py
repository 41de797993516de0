"""HBPO advantage: A = (mu_b - f2(b)) + group z-score, with f2 the hbpo-reward's within-budget value."""
import math

import pytest
import torch

from tests.helpers import D, make_batch, seeded
from workbench import registry
from workbench.advantages.group import grpo
from workbench.advantages.hbpo import budget_baseline, hbpo_advantage, intra_budget
from workbench.rewards.hbpo import BUDGET_SENTENCE, hbpo_reward

pytestmark = pytest.mark.covers("hbpo-advantage")

L = 16


def budget_batch(seed, P=3, budgets=(2, 4, 8, 10), per=2):
    g = seeded(seed)
    G = len(budgets) * per
    B = P * G
    b = torch.tensor(budgets).repeat_interleave(per).repeat(P)
    rewards = torch.rand(B, generator=g, dtype=D) * (torch.rand(B, generator=g) < 0.6)
    batch = make_batch(rewards, torch.arange(P).repeat_interleave(G), torch.randint(1, 6, (B,), generator=g))
    batch.prompts = [f"q{i // G}\n" + BUDGET_SENTENCE.format(budget=int(x)) + "." for i, x in enumerate(b)]
    return batch, b.to(D)


def test_registered_with_the_reward_defaults():
    e = registry.get("advantage", "hbpo-advantage")
    assert e.defaults["beta"] == 1.0 and e.defaults["max_len"] is None and e.defaults["reference_bug"] is False


@pytest.mark.parametrize("seed", range(3))
def test_a_inter_has_zero_mean_over_the_querys_rollouts_and_a_intra_is_constant_per_subgroup(seed):
    batch, b = budget_batch(seed)
    A = hbpo_advantage(batch, max_len=L)[:, 0]
    a_intra = A - grpo(batch)[:, 0]
    for q in batch.group.unique():
        rows = batch.group == q
        assert float((A[rows] - a_intra[rows]).sum()) == pytest.approx(0.0, abs=1e-12)
        for budget in b[rows].unique():
            sub = rows & (b == budget)
            assert torch.allclose(a_intra[sub], a_intra[sub][0].expand(int(sub.sum())), rtol=0, atol=1e-15)


def test_hand_computed_intra_term():
    batch, b = budget_batch(0, P=1, budgets=(4,), per=3)
    batch.rewards = torch.tensor([1.0, 0.5, 0.0], dtype=D)
    expected = 0.5 - math.cos(math.pi * 4 / (2 * L))
    assert intra_budget(batch.rewards, batch.group, b, max_len=L).tolist() == pytest.approx([expected] * 3)


@pytest.mark.parametrize("seed", range(3))
def test_one_budget_whose_f2_is_the_subgroup_mean_is_grpo(seed):
    g = seeded(seed)
    f2 = float(budget_baseline(torch.tensor([6.0], dtype=D), max_len=L))
    rewards = f2 + 0.3 * torch.randn(16, generator=g, dtype=D)  # 4 prompts x 4 rows, all of budget 6
    batch = make_batch(rewards, torch.arange(4).repeat_interleave(4), [3] * 16)
    means = torch.stack([rewards[batch.group == q].mean() for q in range(4)])
    batch.rewards = rewards + (f2 - means)[batch.group]  # every subgroup's mean is now f2(6)
    torch.testing.assert_close(hbpo_advantage(batch, max_len=L, budgets=[6] * 16), grpo(batch), rtol=0, atol=1e-12)


def test_f2_is_what_the_reward_pays_a_correct_answer_within_its_budget():
    budgets = torch.tensor([1.0, 3.0, 8.0, 15.0], dtype=D)
    paid = hbpo_reward(["A"] * 4, [[0]] * 4, budget=budgets.tolist(), scores=[1.0] * 4, max_len=L, beta=2.0)
    torch.testing.assert_close(budget_baseline(budgets, max_len=L, beta=2.0), torch.tensor(paid, dtype=D))


def test_budgets_are_read_from_the_prompts():
    batch, b = budget_batch(1)
    assert torch.equal(hbpo_advantage(batch, max_len=L), hbpo_advantage(batch, max_len=L, budgets=b))


def test_reference_bug_adds_the_intra_term_twice():
    batch, b = budget_batch(2)
    paper, bug = hbpo_advantage(batch, max_len=L), hbpo_advantage(batch, max_len=L, reference_bug=True)
    a_intra = intra_budget(batch.rewards, batch.group, b, max_len=L)
    torch.testing.assert_close(bug - paper, a_intra[:, None] * batch.mask, rtol=0, atol=1e-12)


def test_singletons_and_missing_inputs_are_refused_with_the_fix():
    batch, b = budget_batch(3)
    with pytest.raises(ValueError, match="needs max_len"):
        hbpo_advantage(batch)
    batch.prompts[5] = "no budget here"
    with pytest.raises(ValueError, match=r"rows \[5\] announce no budget"):
        hbpo_advantage(batch, max_len=L)
    single = make_batch([1.0, 0.0, 1.0], [0, 0, 1], [2, 2, 2])
    with pytest.raises(ValueError, match="group of one"):
        hbpo_advantage(single, max_len=L, budgets=[4, 4, 4])
    assert hbpo_advantage(single, max_len=L, budgets=[4, 4, 4], allow_singletons=True)[2].abs().sum() == 0
    kept = hbpo_advantage(single, max_len=L, budgets=[4, 4, 4], allow_singletons="keep")  # A_inter = R, A_intra = 0
    assert torch.equal(kept[2], 1.0 / (1 + 1e-6) * single.mask[2])
    with pytest.raises(ValueError, match="stale"):
        hbpo_advantage(single, max_len=L, budgets=[4, 4, 4], allow_singletons=True, reference_bug=True)
    with pytest.raises(ValueError, match="budget"):
        hbpo_advantage(batch, max_len=4, budgets=[8] * batch.size)  # a budget above L_max
