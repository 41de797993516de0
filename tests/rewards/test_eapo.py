"""EAPO's geometric discount over the rounds of an episode, on the per-round rows of the group transform: the
catalog's properties checked on the training path (split_rounds, then the reward shaping)."""
import pytest
import torch

from tests.helpers import D, make_batch
from tests.transforms.test_eapo import build_episodes, ctx, episode_batch
from workbench import registry
from workbench.rewards.eapo import ROUND, ROUNDS, discount, eapo_rewards, rounds_to_go
from workbench.transforms.eapo import split_rounds

pytestmark = pytest.mark.covers("eapo")


def episodes_of(rounds: list[int], outcomes: list[float]):
    """One episode per entry, of rounds[i] rounds (two action tokens each, one observation token between), all in
    one group, outcome outcomes[i]."""
    rows = [([5, 6], [([10 + t, 11 + t], [90] if t < n - 1 else []) for t in range(n)]) for n in rounds]
    return build_episodes(rows, group=[0] * len(rounds), rewards=outcomes)


def round_table(gamma: float, rounds: list[int], outcomes: list[float]) -> list[list[float]]:
    """Per episode, the rewards of its round rows after split_rounds + eapo_rewards, in round order."""
    rows = eapo_rewards(split_rounds(episodes_of(rounds, outcomes)), ctx(), gamma=gamma)
    table = [[None] * n for n in rounds]
    starts = [sum(rounds[:i]) for i in range(len(rounds))]  # split_rounds keeps episodes in order, rounds in order
    for i, n in enumerate(rounds):
        for t in range(n):
            step = rows.turn_info[starts[i] + t][0]
            assert (step[ROUND], step[ROUNDS]) == (t, n)
            table[i][t] = float(rows.rewards[starts[i] + t])
    return table


def test_discount_is_gamma_to_the_rounds_to_go():
    to_go = torch.tensor([0, 1, 2, 5])
    assert torch.allclose(discount(to_go, 0.9), torch.tensor([1.0, 0.9, 0.81, 0.9 ** 5], dtype=D))
    assert discount(to_go, 1.0).eq(1).all() and discount(to_go, 0.5).dtype == D


def test_terminal_round_gets_the_outcome_and_gamma_one_broadcasts_it():
    """Catalog test (1), through split_rounds + eapo_rewards on episodes of 1 to 6 rounds."""
    rounds, outcomes = [1, 2, 3, 4, 5, 6], [1.0, 0.5, -2.0, 1.0, 0.25, 1.0]
    table = round_table(0.9, rounds, outcomes)
    assert [r[-1] for r in table] == pytest.approx(outcomes)                  # r_T = R_T
    for r, n, R in zip(table, rounds, outcomes):
        assert r == pytest.approx([0.9 ** (n - 1 - t) * R for t in range(n)])
    uniform = round_table(1.0, rounds, outcomes)
    assert all(r == pytest.approx([R] * n) for r, n, R in zip(uniform, rounds, outcomes))


def test_shorter_success_earns_more_per_round():
    """Catalog test (2): equal outcomes, episodes of 1 to 6 rounds: the mean per-round reward falls with the length
    for gamma < 1 and is flat for gamma = 1."""
    rounds = [1, 2, 3, 4, 5, 6]
    for gamma in (0.5, 0.9, 0.99):
        per_round = [sum(r) / len(r) for r in round_table(gamma, rounds, [1.0] * 6)]
        assert all(a > b for a, b in zip(per_round, per_round[1:])), gamma
    assert [sum(r) / len(r) for r in round_table(1.0, rounds, [1.0] * 6)] == pytest.approx([1.0] * 6)


def test_shaping_discounts_each_round_row():
    rows = split_rounds(episode_batch())  # rounds (t, T): (0,3) (1,3) (2,3) (0,1) (0,2) (1,2) (0,2) (1,2)
    assert rounds_to_go(rows).tolist() == [2, 1, 0, 0, 1, 0, 1, 0]
    c = ctx()
    out = eapo_rewards(rows, c, gamma=0.5)
    R = rows.rewards.double()
    expected = R * torch.tensor([0.25, 0.5, 1, 1, 0.5, 1, 0.5, 1], dtype=D)
    assert torch.allclose(out.rewards.double(), expected) and out.rewards.dtype == rows.rewards.dtype
    assert c.metrics["eapo/discount"] == pytest.approx(5.75 / 8)
    assert torch.equal(eapo_rewards(rows, ctx(), gamma=1.0).rewards, rows.rewards)


def test_one_turn_rows_are_left_alone_and_whole_episodes_are_refused():
    one_turn = make_batch([1.0, 0.0, 0.5], [0, 0, 0])
    assert torch.equal(eapo_rewards(one_turn, ctx(), gamma=0.5).rewards, one_turn.rewards)
    with pytest.raises(ValueError, match="group_transforms"):
        eapo_rewards(episode_batch(), ctx(), gamma=0.9)
    for gamma in (0.0, 1.5, -0.1):
        with pytest.raises(ValueError, match="gamma"):
            eapo_rewards(one_turn, ctx(), gamma=gamma)


def test_grpo_over_round_rows_prefers_the_shorter_win():
    """Two wins of a group, 1 and 3 rounds: every round of the short one gets a higher advantage than any of the
    long one's non-final rounds (the efficiency incentive)."""
    batch = episode_batch().select(torch.tensor([0, 1]))
    batch.rewards = torch.tensor([1.0, 1.0])
    rows = eapo_rewards(split_rounds(batch), ctx(), gamma=0.9)
    adv = registry.get("advantage", "grpo").fn(rows)[:, 0]
    long, short = adv[:3], adv[3]
    assert (short > long[:2]).all() and short == pytest.approx(float(long[2]))
