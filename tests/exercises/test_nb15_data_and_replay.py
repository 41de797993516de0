"""Notebook 15's exercise checks accept the right answer and explain a wrong one; the answers follow the library."""
import math

import pytest

from tests.exercises.checks import explains
from workbench.exercises import nb15_data_and_replay as ex


@pytest.mark.parametrize("check, right, wrong", [
    (ex.check_signal_shares, [0.5695, 0.9922], [0.9922, 0.5695]),
    (ex.check_roc_counts, [2, 6], [1, 7]),
    (ex.check_dots_probability, 0.2645, 0.3679),
], ids=lambda x: getattr(x, "__name__", None))
def test_checks_accept_right_and_reject_wrong(check, right, wrong):
    assert check(right).startswith("correct")
    for bad in (wrong, "x", [1, "a"]):
        with pytest.raises(AssertionError, match="not quite"):
            check(bad)


@pytest.mark.parametrize("check, wrong, explanation", [
    (ex.check_signal_shares, [1 - 0.1 ** 8, 1 - 0.5 ** 8], "subtract (1 - p)^G"),
    (ex.check_signal_shares, [0.1 ** 8 + 0.9 ** 8, 2 * 0.5 ** 8], "WITHOUT a signal"),
    (ex.check_signal_shares, 0.57, "two numbers"),
    (ex.check_roc_counts, [1, 7], "half to even"),
    (ex.check_roc_counts, [6, 2], "correct traces first"),
    (ex.check_roc_counts, [3, 6], "exactly G = 8"),
    (ex.check_dots_probability, math.exp(-1), "unnormalised"),
    (ex.check_dots_probability, ex.dots_probability(tau=1e-3), "softer tau"),
    (ex.check_dots_probability, "0.26", "one number"),
])
def test_checks_explain_plausible_wrong_answers(check, wrong, explanation):
    explains(check, wrong, explanation)


def test_the_answers_are_the_hand_computed_ones():
    assert ex.signal_shares() == pytest.approx([1 - 0.1 ** 8 - 0.9 ** 8, 1 - 2 * 0.5 ** 8])
    assert ex.roc_counts() == [2, 6] and ex.roc_counts(correct=1) == [1, 7]  # one correct: its minimum is 1
    e = [math.exp(-abs(d - 0.5) / 0.1) for d in (0.5, 0.4, 0.9)]
    assert ex.dots_probability() == pytest.approx(e[1] / sum(e))
