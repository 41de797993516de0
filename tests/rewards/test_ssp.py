"""SSP's proposer reward: the card's three tests (range and the always-solved zero, the intermediate-difficulty peak and
zeros, the penalty for every invalid proposal), the success rate's threshold, the registered TRL-style reward and its
refusals."""
import pytest
import torch

from workbench import registry
from workbench.rewards.ssp import (REWARD_TYPES, intermediate_difficulty, one_minus_acc, proposer_rewards, ssp_reward,
                                   success_rate)

pytestmark = pytest.mark.covers("ssp")
N = 5
P = torch.arange(N + 1, dtype=torch.float64) / N  # every success rate n = 5 attempts can give: 0, 0.2, ..., 1


def grid_with(successes: list[int], n: int = N) -> torch.Tensor:
    """[Q, n] solver rewards: question j solved by its first successes[j] attempts (reward 1), failed by the rest."""
    return torch.tensor([[1.0] * s + [0.0] * (n - s) for s in successes])


def test_the_success_rate_counts_attempts_with_positive_reward():
    rewards = torch.tensor([[1.0, 0.0, -1.0, 0.5, 1e-9], [0.0, 0.0, 0.0, -0.5, 0.0]])
    assert success_rate(rewards).tolist() == [0.6, 0.0]
    assert success_rate(grid_with(list(range(N + 1)))).tolist() == pytest.approx(P.tolist())


def test_one_minus_acc_is_in_unit_range_and_zero_when_the_solver_always_succeeds():
    """Card (1)."""
    valid = torch.ones(N + 1, dtype=torch.bool)
    r = proposer_rewards(success_rate(grid_with(list(range(N + 1)))), valid)
    assert bool(((r >= 0) & (r <= 1)).all()) and r.tolist() == pytest.approx((1 - P).tolist())
    assert r[-1] == 0.0 and r[0] == 1.0  # always solved: nothing; never solved: the most
    assert torch.equal(one_minus_acc(P), 1 - P)


def test_intermediate_difficulty_peaks_at_one_half_and_is_zero_at_the_ends():
    """Card (2): 4 p (1 - p) at l = 0, r = 1 -- 1 at p = 1/2, 0 at p = 0 and p = 1 (too easy or never solved)."""
    p = torch.linspace(0, 1, 101, dtype=torch.float64)
    r = intermediate_difficulty(p)
    assert r[50] == 1.0 and int(r.argmax()) == 50 and r[0] == 0.0 and r[-1] == 0.0
    assert torch.allclose(r[1:-1], 4 * p[1:-1] * (1 - p[1:-1]))
    through = proposer_rewards(P, torch.ones(N + 1, dtype=torch.bool), reward_type="intermediate_difficulty")
    assert through.tolist() == pytest.approx([0.0, 0.64, 0.96, 0.96, 0.64, 0.0])


def test_left_and_right_shift_the_parabola_but_not_its_zeros_at_the_ends():
    """4 (l + p)(r - p) inside (0, 1), peaking at (r - l) / 2; 0 at p in {0, 1} whatever l and r."""
    p = torch.tensor([0.0, 0.2, 0.5, 1.0], dtype=torch.float64)
    assert intermediate_difficulty(p, 0.2, 0.8).tolist() == pytest.approx([0.0, 4 * 0.4 * 0.6, 4 * 0.7 * 0.3, 0.0])
    fine = torch.linspace(0.01, 0.99, 99, dtype=torch.float64)
    assert float(fine[intermediate_difficulty(fine, 0.0, 0.6).argmax()]) == pytest.approx(0.3)


@pytest.mark.parametrize("reward_type", REWARD_TYPES)
@pytest.mark.parametrize("penalty", [0.0, -1.0, 0.25])
def test_every_invalid_proposal_gets_the_penalty_whatever_its_success_rate(reward_type, penalty):
    """Card (3): the penalty on invalid rows only, for every p (an invalid row's p, even NaN, is never read)."""
    p = torch.cat([P, P, torch.tensor([float("nan")], dtype=torch.float64)])
    valid = torch.tensor([True] * (N + 1) + [False] * (N + 2))
    r = proposer_rewards(p, valid, reward_type=reward_type, format_penalty=penalty)
    assert r[~valid].tolist() == [penalty] * (N + 2)
    assert torch.equal(r[valid], proposer_rewards(P, torch.ones(N + 1, dtype=torch.bool), reward_type=reward_type))
    assert not torch.isnan(r).any()


def test_format_only_pays_every_valid_proposal_one():
    r = proposer_rewards(P, torch.tensor([True, False] * 3), reward_type="format_only", format_penalty=-1.0)
    assert r.tolist() == [1.0, -1.0] * 3


def test_the_registered_reward_reads_the_success_rate_and_the_verdict_columns():
    entry = registry.get("reward", "ssp")
    assert entry.family == "multiagent" and entry.title == registry.catalog()["ssp"]["title"]
    assert entry.defaults == {"reward_type": "1-acc", "left": 0.0, "right": 1.0, "format_penalty": 0.0}
    out = ssp_reward(["Q:Bov", "Q:Kel", "[Zar]", "Q:Mip"], scores=[1.0, 1.0, 0.0, 1.0],
                     success_rate=[0.2, 1.0, None, 0.5], reward_type="intermediate_difficulty", format_penalty=-0.5)
    assert out == pytest.approx([0.64, 0.0, -0.5, 1.0])
    assert ssp_reward(["a", "b"], scores=[1.0, 1.0], success_rate=[None, 0.4]) == pytest.approx([0.0, 0.6])


def test_listed_among_a_recipes_rewards_it_refuses_naming_the_transform():
    with pytest.raises(ValueError, match=r"only the group transform ssp computes .* group_transforms=\[use\('ssp'\)\]"):
        ssp_reward(["Q:Bov"], scores=[1.0])
    with pytest.raises(ValueError, match="success_rate has 1 rows for 2 completions"):
        ssp_reward(["a", "b"], scores=[1.0, 1.0], success_rate=[0.5])


@pytest.mark.parametrize("kw, match", [
    (dict(reward_type="1-accuracy"), r"reward_type='1-accuracy' is not one of"),
    (dict(left=float("nan")), "left=nan must be a finite number"),
    (dict(format_penalty="-1"), "format_penalty='-1' must be a finite number"),
    (dict(right=True), "right=True must be a finite number")])
def test_bad_settings_are_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        proposer_rewards(P, torch.ones(N + 1, dtype=torch.bool), **kw)
