"""Notebook 12's exercise checks accept the right answer and explain a wrong one; the answers follow the library."""
import pytest

from tests.exercises.checks import accepts_right_rejects_wrong, explains
from workbench.exercises import nb12_reward_design as ex


@pytest.mark.parametrize("check, right, wrong", [
    (ex.check_cosine_length_value, 0.875, 0.75),
    (ex.check_dominant_aggregation, "normalize_then_sum", "sum_then_normalize"),
    (ex.check_dominant_aggregation, {"normalize_then_sum"}, {"normalize_then_sum", "sum_then_normalize"}),
    (ex.check_soft_overlong_first_length, 8, 7),
    (ex.check_ssl_tier, 0.1, 0.3),
], ids=lambda x: getattr(x, "__name__", None))
def test_checks_accept_right_and_reject_wrong(check, right, wrong):
    accepts_right_rejects_wrong(check, right, wrong, "x", [1, "a"])


@pytest.mark.parametrize("check, wrong, explanation", [
    (ex.check_cosine_length_value, -0.875, "wrong answer's reward"),
    (ex.check_cosine_length_value, 0.5 + 0.5 * 0.5, "(1 + cos(pi u)) / 2"),
    (ex.check_cosine_length_value, 1.0 - 0.25 * 1.5, "other way round"),
    (ex.check_cosine_length_value, 0.5 + 0.25 * (1 + 0.94495695), "radians"),
    (ex.check_cosine_length_value, 0.8272542, "u = |y| / L = 0.333333"),  # the L = 10 value of the table
    (ex.check_dominant_aggregation, "sum_then_normalize", "drowns"),
    (ex.check_dominant_aggregation, "both", "name of a mode"),
    (ex.check_soft_overlong_first_length, 7, "just after"),
    (ex.check_soft_overlong_first_length, 3, "END of the budget"),
    (ex.check_ssl_tier, 0.3, "outside the 1 sigma ring"),
    (ex.check_ssl_tier, 0.6, "outside the 0.5 sigma ring"),
    (ex.check_ssl_tier, 0.0, "inclusive"),
    (ex.check_ssl_tier, 1.0, "exact tier"),
])
def test_checks_explain_plausible_wrong_answers(check, wrong, explanation):
    explains(check, wrong, explanation)


def test_answers_follow_the_library():
    import math

    import torch

    from workbench.rewards.length import cosine_scaled, soft_overlong
    from workbench.rewards.ssl import answer_distance, distance_tier

    assert ex.cosine_length_value() == pytest.approx(0.5 + 0.25 * (1 + math.cos(math.pi / 3))) == 0.875
    assert ex.cosine_length_value() == pytest.approx(float(cosine_scaled(
        torch.tensor([4.0]), torch.tensor([True]), max_len=12)[0]))
    assert ex.cosine_length_value(4, 10) == pytest.approx(0.5 + 0.25 * (1 + math.cos(0.4 * math.pi)))
    assert ex.cosine_length_value(correct=False) == pytest.approx(-ex.cosine_length_value())
    assert ex.dominant_aggregations() == {"normalize_then_sum"}
    assert ex.dominant_aggregations(scores=(0.2, 0.8, 0.6, 0.3)) == {"sum_then_normalize",
                                                                           "normalize_then_sum"}  # a 0..1 scale
    assert ex.dominant_aggregations(weight=2.0) == set()  # a heavy enough anti-correlated reward wins anyway
    penalties = soft_overlong(torch.zeros(10), torch.arange(1.0, 11.0), max_len=10, buffer=3)
    assert ex.soft_overlong_first_length() == int(torch.nonzero(penalties < 0)[0]) + 1 == 8
    assert ex.soft_overlong_first_length(buffer=1) == 10
    assert ex.ssl_tier_value() == distance_tier(answer_distance("48", "40")) == 0.1  # d = 0.2: the edge
    assert ex.ssl_tier_value("42") == 0.6 and ex.ssl_tier_value("44") == 0.3
    assert ex.ssl_tier_value("49") == 0.0 and ex.ssl_tier_value("22", "20") == 0.3
    assert ex.check_ssl_tier(0.3, pred="22", gold="20") == "correct"
    with pytest.raises(AssertionError, match="inclusive"):
        ex.check_ssl_tier(0.1, pred="22", gold="20")
