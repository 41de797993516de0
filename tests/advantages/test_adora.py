"""ADORA: a group keeps its advantages when its longest correct answer is longer than its mean wrong one."""
import pytest
import torch

from tests.helpers import D, make_batch, seeded
from workbench import registry
from workbench.advantages.adora import adora, length_weights
from workbench.advantages.group import grpo

pytestmark = pytest.mark.covers("adora")


def chained(rewards, group, lengths, **fields):
    b = make_batch(rewards, group, lengths, **fields)
    b.advantages = grpo(b)
    return b


# group 0: longest correct 5 > mean wrong (2 + 3)/2 -> kept; group 1: longest correct 2 < mean wrong 4 -> damped
REW = [1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0]
GRP = [0, 0, 0, 0, 1, 1, 1, 1]
LEN = [5, 2, 3, 1, 2, 4, 4, 1]


def test_registered_as_a_chain_entry_with_the_codes_defaults():
    e = registry.get("advantage", "adora")
    assert e.reads == ("advantages",) and e.defaults == {"lam": 0.1, "threshold": 0.5, "max_length": None,
                                                         "empty": "llm"}


def test_lambda_one_is_grpo():
    g = seeded(0)
    b = chained((torch.rand(12, generator=g) < 0.5).double(), torch.arange(3).repeat_interleave(4),
                torch.randint(1, 7, (12,), generator=g))
    assert torch.equal(adora(b, lam=1.0), grpo(b))


def test_a_group_whose_longest_correct_answer_is_shorter_than_the_mean_wrong_one_is_scaled_by_lambda():
    b = chained(REW, GRP, LEN)
    out = adora(b, lam=0.1)
    first, second = torch.tensor(GRP) == 0, torch.tensor(GRP) == 1
    assert torch.equal(out[first], b.advantages[first])
    torch.testing.assert_close(out[second], 0.1 * b.advantages[second], rtol=0, atol=0)
    assert float(b.advantages[second].abs().sum()) > 0  # the damped group did carry a signal


def test_a_tie_damps_the_group():
    b = chained([1.0, 0.0, 0.0], [0, 0, 0], [3, 2, 4])  # longest correct 3 = mean wrong 3
    torch.testing.assert_close(adora(b, lam=0.25), 0.25 * b.advantages, rtol=0, atol=0)


def test_signs_are_never_flipped():
    g = seeded(1)
    b = make_batch((torch.rand(40, generator=g) < 0.5).double(), torch.arange(10).repeat_interleave(4),
                   torch.randint(1, 9, (40,), generator=g))
    b.advantages = torch.randn(b.mask.shape, generator=g, dtype=D) * b.mask
    out = adora(b, lam=0.3)
    assert torch.equal(torch.sign(out), torch.sign(b.advantages))
    assert bool(((out.abs() <= b.advantages.abs()) & (out.abs() >= 0.3 * b.advantages.abs() - 1e-15)).all())


def test_truncated_wrong_answers_leave_the_mean_wrong_length():
    # group 1 again, but its two long wrong answers were cut at the budget: no untruncated wrong answer is left, and
    # a group without one keeps its advantages (the Logic-RL code's mean_neg = -inf)
    truncated = torch.tensor([False, False, False, False, False, True, True, False])
    b = chained(REW, GRP, LEN, truncated=truncated)
    assert torch.equal(adora(b), b.advantages)
    # the code's length rule does the same: responses of >= max_length tokens count as truncated
    assert torch.equal(adora(chained(REW, GRP, LEN), max_length=4), b.advantages)


@pytest.mark.parametrize("empty, no_correct, no_wrong", [("llm", 0.1, 1.0), ("vl", 1.0, 0.1)])
def test_groups_without_correct_or_without_wrong_answers_follow_the_codes_convention(empty, no_correct, no_wrong):
    correct, lengths = torch.tensor([False, False, True, True]), torch.tensor([2.0, 3.0, 2.0, 3.0])
    w = length_weights(correct, lengths, torch.zeros(4, dtype=torch.bool), torch.tensor([0, 0, 1, 1]), lam=0.1,
                       empty=empty)
    assert w.tolist() == [no_correct, no_correct, no_wrong, no_wrong]


def test_bad_parameters_are_refused():
    b = chained(REW, GRP, LEN)
    with pytest.raises(ValueError, match="lam"):
        adora(b, lam=1.5)
    with pytest.raises(ValueError, match="empty must be one of"):
        adora(b, empty="both")
    with pytest.raises(ValueError, match="advantages"):
        adora(make_batch(REW, GRP, LEN))
