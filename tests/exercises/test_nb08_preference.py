"""Notebook 08's exercise checks accept the right answer and reject a wrong one."""
import pytest

from workbench.exercises import nb08_preference as ex


def test_exercise_checks_accept_right_and_reject_wrong_answers():
    assert ex.check_dpo_weight_at_zero(0.05) == "correct"
    assert ex.check_dpo_weight_at_zero(0.25, beta=0.5) == "correct"
    for wrong in (0.1, 0.5, 0.025):
        with pytest.raises(AssertionError, match="not quite"):
            ex.check_dpo_weight_at_zero(wrong)
    assert ex.check_reference_free(["simpo"]) == "correct" and ex.check_reference_free("simpo")
    for wrong in (["dpo"], ["simpo", "hinge"], []):
        with pytest.raises(AssertionError, match="not quite"):
            ex.check_reference_free(wrong)
    assert ex.check_pure_rock_exploitability(0.45) == "correct"
    assert ex.check_pure_rock_exploitability(0.5, strength=1.0) == "correct"
    for wrong in (0.95, 0.0, 0.5):
        with pytest.raises(AssertionError, match="not quite"):
            ex.check_pure_rock_exploitability(wrong)
