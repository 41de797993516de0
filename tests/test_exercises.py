"""The notebooks' exercise checks accept the right answer and reject a wrong one, and the answers follow the
library."""
from __future__ import annotations

import pytest

from workbench import exercises


def test_aggregation_exercises():
    assert exercises.check_token_weight(1 / 20) == "correct"
    assert exercises.check_token_weight(0.05) == "correct"
    assert exercises.check_token_weight(1 / 1010, mode="token-mean") == "correct"
    with pytest.raises(AssertionError):
        exercises.check_token_weight(1 / 1010)
    assert exercises.check_length_bias("short") == "correct"
    assert exercises.check_length_bias("same", mode="token-mean") == "correct"
    with pytest.raises(AssertionError):
        exercises.check_length_bias("long")


def test_kl_exercises():
    assert exercises.check_k1_sign("negative") == "correct"
    assert exercises.check_k1_sign("positive", p=0.5, p_ref=0.2) == "correct"
    with pytest.raises(AssertionError):
        exercises.check_k1_sign("positive")
    assert exercises.check_nonnegative_estimators(["k3", "abs", "k2"]) == "correct"
    for wrong in (["k3"], ["k1", "k2", "k3", "abs"]):
        with pytest.raises(AssertionError):
            exercises.check_nonnegative_estimators(wrong)
    assert exercises.check_reverse_kl_gradient("k2") == "correct"
    assert exercises.check_reverse_kl_gradient(["k2"]) == "correct"
    for wrong in ("k3", ["k1", "k2"]):
        with pytest.raises(AssertionError):
            exercises.check_reverse_kl_gradient(wrong)


EXERCISES = [
    (exercises.check_on_policy_clip_fraction, 0.0, 0.05),
    (exercises.check_nonzero_weight_objectives, {"cispo", "sapo"}, {"cispo", "sapo", "ppo-clip"}),
    (exercises.check_rloo_by_hand, [1.0, -1 / 3, -1 / 3, -1 / 3], [0.75, -0.25, -0.25, -0.25]),
    (exercises.check_largest_advantage_rate, 1 / 8, 0.5),
    (exercises.check_k3_old, 1 / 6, 0.0),
    (exercises.check_no_signal_metric, "frac_zero_std_groups", "reward/std"),
]


@pytest.mark.parametrize("check, right, wrong", EXERCISES, ids=[e[0].__name__ for e in EXERCISES])
def test_exercise_checks_accept_right_and_reject_wrong(check, right, wrong):
    assert check(right) == "correct"
    with pytest.raises(AssertionError, match="not quite"):
        check(wrong)


def test_exercise_answers_follow_the_library():
    assert exercises.nonzero_weight_objectives() == {"cispo", "sapo"}
    assert exercises.k3_old((0.5, 1.0, 2.0)) == pytest.approx(1 / 6)
    assert exercises.largest_advantage_success_rate(4) == pytest.approx(1 / 4)
    with pytest.raises(AssertionError, match="not quite"):
        exercises.check_no_signal_metric("no/such/metric")


def test_exercise_checks_accept_right_and_reject_wrong_answers():
    assert exercises.check_dpo_weight_at_zero(0.05) == "correct"
    assert exercises.check_dpo_weight_at_zero(0.25, beta=0.5) == "correct"
    for wrong in (0.1, 0.5, 0.025):
        with pytest.raises(AssertionError, match="not quite"):
            exercises.check_dpo_weight_at_zero(wrong)
    assert exercises.check_reference_free(["simpo"]) == "correct" and exercises.check_reference_free("simpo")
    for wrong in (["dpo"], ["simpo", "hinge"], []):
        with pytest.raises(AssertionError, match="not quite"):
            exercises.check_reference_free(wrong)
    assert exercises.check_pure_rock_exploitability(0.45) == "correct"
    assert exercises.check_pure_rock_exploitability(0.5, strength=1.0) == "correct"
    for wrong in (0.95, 0.0, 0.5):
        with pytest.raises(AssertionError, match="not quite"):
            exercises.check_pure_rock_exploitability(wrong)
