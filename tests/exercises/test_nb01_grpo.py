"""Notebook 01's exercise checks accept the right answer and explain a wrong one; the answers follow the library."""
import pytest

from tests.exercises.checks import accepts_right_rejects_wrong, explains
from workbench.exercises import nb01_grpo as ex


def test_sum_of_squares_check_accepts_right_and_rejects_wrong():
    accepts_right_rejects_wrong(ex.check_grpo_sum_of_squares, (7.0, 7.0), (8.0, 8.0))


@pytest.mark.parametrize("wrong, explanation", [
    # the std division makes every group's total push G - 1, whatever its success rate
    ((8.0, 8.0), "population std"),
    ((0.875, 2.0), "without the std division"),
    (7.0, "one number per group"),
])
def test_sum_of_squares_check_explains_plausible_wrong_answers(wrong, explanation):
    explains(ex.check_grpo_sum_of_squares, wrong, explanation)


def test_answers_follow_the_library():
    assert ex.grpo_sum_of_squares() == pytest.approx((7.0, 7.0))  # G - 1 for any group with signal
    assert ex.grpo_sum_of_squares([(1, 0, 0), (5, 2, 2)]) == pytest.approx((2.0, 2.0))
    for empty in (None, "7, 7"):  # no answer yet, or not numbers: rejected, never an error of another type
        with pytest.raises(AssertionError, match="not quite"):
            ex.check_grpo_sum_of_squares(empty)
