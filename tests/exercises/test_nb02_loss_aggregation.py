"""Notebook 02's exercise checks accept the right answer and explain a wrong one; the answers follow the library."""
import pytest

from tests.exercises.checks import accepts_right_rejects_wrong, explains
from workbench.exercises import nb02_loss_aggregation as ex


def test_aggregation_exercises():
    assert ex.check_token_weight(1 / 210) == "correct"  # the 70-token answer of (16, 70, 400)
    assert ex.check_token_weight(0.00476) == "correct"
    assert ex.check_token_weight(1 / 486, mode="token-mean") == "correct"
    for wrong in (1 / 486, 1 / 140, "1/210"):  # token-mean's weight, B = 2, not a number
        with pytest.raises(AssertionError, match="not quite"):
            ex.check_token_weight(wrong)
    # |A| w: 0.5 / (2 x 30) against 1.5 / (2 x 120) under seq-mean-token-mean, 0.5 against 1.5 under token-mean
    assert ex.check_length_bias("short") == "correct"
    assert ex.check_length_bias("long", mode="token-mean") == "correct"
    for wrong, mode in (("long", "seq-mean-token-mean"), ("same", "token-mean")):  # "same": equal advantages
        with pytest.raises(AssertionError, match="not quite"):
            ex.check_length_bias(wrong, mode=mode)


def test_aggregation_exercise_answers_follow_the_library():
    assert ex.token_weight() == pytest.approx(1 / 210)
    assert ex.token_weight((10, 1000), row=0) == pytest.approx(1 / 20)
    # with equal advantages (section 3 of the notebook) the length alone decides
    assert ex.length_bias_answer("seq-mean-token-mean", (20, 200), (-1.0, -1.0)) == "short"
    assert ex.length_bias_answer("token-mean", (20, 200), (-1.0, -1.0)) == "same"
    assert ex.length_bias_answer("seq-mean-token-mean", (30, 120), (-0.5, -2.0)) == "same"  # 4x A, 4x length
    assert ex.length_bias_answer() == "short" and ex.length_bias_answer("token-mean") == "long"


def test_microbatch_weight_check_accepts_right_and_rejects_wrong():
    accepts_right_rejects_wrong(ex.check_local_microbatch_weight, 1 / 120, 1 / 180)


@pytest.mark.parametrize("wrong, explanation", [
    # local denominators only know the micro-batch's own tokens, and the loop divides by k
    (1 / 180, "full-batch"),
    (1 / 60, "divides each micro-batch's loss by k"),
    (1 / 40, "20 + 40"),
])
def test_microbatch_weight_check_explains_plausible_wrong_answers(wrong, explanation):
    explains(ex.check_local_microbatch_weight, wrong, explanation)


def test_microbatch_weight_follows_the_library():
    # the exercise: 1 / (20 + 40) / k; one answer per micro-batch instead: local token-mean is seq-mean-token-mean
    assert ex.local_microbatch_weight() == pytest.approx(1 / 120)
    assert ex.local_microbatch_weight((10, 1000), k=2, row=0) == pytest.approx(ex.token_weight((10, 1000), row=0))
