"""EAPO's geometric discount over the rounds of an episode, on the per-round rows of the group transform."""
import pytest
import torch

from tests.helpers import D, make_batch
from tests.transforms.test_eapo import ctx, episode_batch
from workbench import registry
from workbench.rewards.eapo import eapo_rewards, round_rewards, rounds_to_go
from workbench.transforms.eapo import split_rounds

pytestmark = pytest.mark.covers("eapo")


def test_terminal_round_gets_the_outcome_and_gamma_one_broadcasts_it():
    R, T = torch.tensor([1.0, 0.5, -2.0], dtype=D), torch.tensor([4, 1, 3])
    r = round_rewards(R, T, 0.9)
    assert torch.equal(r[torch.arange(3), T - 1], R)                       # r_T = R_T
    assert torch.allclose(r[0], torch.tensor([0.9 ** 3, 0.9 ** 2, 0.9, 1.0], dtype=D))
    assert r[1, 1:].eq(0).all() and r[2, 3:].eq(0).all()                   # nothing past an episode's rounds
    uniform = round_rewards(R, T, 1.0)
    for i in range(3):
        assert uniform[i, :T[i]].eq(R[i]).all()


def test_shorter_success_earns_more_per_round():
    for gamma in (0.5, 0.9, 0.99):
        r = round_rewards(torch.ones(6, dtype=D), torch.arange(1, 7), gamma)
        mean_per_round = r.sum(-1) / torch.arange(1, 7)
        assert (mean_per_round[:-1] > mean_per_round[1:]).all(), gamma
    flat = round_rewards(torch.ones(6, dtype=D), torch.arange(1, 7), 1.0)
    assert torch.allclose(flat.sum(-1) / torch.arange(1, 7), torch.ones(6, dtype=D))


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
