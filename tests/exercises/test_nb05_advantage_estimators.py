"""Notebook 05's exercise checks accept the right answer and explain a wrong one; the answers follow the library."""
import pytest

from tests.exercises.checks import accepts_right_rejects_wrong, explains
from workbench.exercises import nb05_advantage_estimators as ex


@pytest.mark.parametrize("check, right, wrong", [
    (ex.check_opo_by_hand, [0.875, -0.125, -0.125, -0.125], [0.75, -0.25, -0.25, -0.25]),
    (ex.check_rloo_by_hand, [1.0, -1 / 3, -1 / 3, -1 / 3], [0.75, -0.25, -0.25, -0.25]),
    (ex.check_largest_advantage_rate, 1 / 8, 0.5),
], ids=lambda x: getattr(x, "__name__", None))
def test_checks_accept_right_and_reject_wrong(check, right, wrong):
    accepts_right_rejects_wrong(check, right, wrong)


@pytest.mark.parametrize("wrong, explanation", [  # OPO's baseline is length-weighted
    ([0.75, -0.25, -0.25, -0.25], "plain mean"),
    ([1.0, -1 / 3, -1 / 3, -1 / 3], "length"),
])
def test_opo_check_explains_plausible_wrong_answers(wrong, explanation):
    explains(ex.check_opo_by_hand, wrong, explanation)


def test_answers_follow_the_library():
    assert ex.largest_advantage_success_rate(4) == pytest.approx(1 / 4)
    assert ex.opo_advantages() == pytest.approx([0.875, -0.125, -0.125, -0.125])
    assert ex.opo_advantages(lengths=(4, 4, 4, 4)) == pytest.approx([0.75, -0.25, -0.25, -0.25])
    assert ex.check_opo_by_hand([0.75, -0.25, -0.25, -0.25], lengths=(4, 4, 4, 4)) == "correct"
