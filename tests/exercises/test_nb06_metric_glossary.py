"""Notebook 06's exercise checks accept the right answer and reject a wrong one; the answers follow the library."""
import pytest

from tests.exercises.checks import accepts_right_rejects_wrong
from workbench.exercises import nb06_metric_glossary as ex


@pytest.mark.parametrize("check, right, wrong", [
    (ex.check_k3_old, 1 / 6, 0.0),
    (ex.check_no_signal_metric, "frac_zero_std_groups", "reward/std"),
], ids=lambda x: getattr(x, "__name__", None))
def test_checks_accept_right_and_reject_wrong(check, right, wrong):
    accepts_right_rejects_wrong(check, right, wrong)


def test_answers_follow_the_library():
    assert ex.k3_old((0.5, 1.0, 2.0)) == pytest.approx(1 / 6)
    with pytest.raises(AssertionError, match="not quite"):
        ex.check_no_signal_metric("no/such/metric")
