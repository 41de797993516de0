"""Notebook 10's exercise checks accept the right answer and explain a wrong one; the answers follow the library."""
import pytest

from tests.exercises.checks import accepts_right_rejects_wrong, explains
from workbench.exercises import nb10_beyond_the_clip as ex


@pytest.mark.parametrize("check, right, wrong", [
    (ex.check_gbpo_target_ratios, (1.1614, 1.0), (1.2, 0.8)),
    (ex.check_dispo_masked_tokens, {"b", "c", "e"}, {"e"}),
    (ex.check_dispo_masked_tokens, ["e", "c", "b"], {"b", "c"}),
    (ex.check_bapo_exercise, (0.3901, 0.75), (0.3901, 0.7)),
    (ex.check_shaping_weights, (0.25, 0.09), (0.5, 0.9)),
])
def test_checks_accept_right_and_reject_wrong(check, right, wrong):
    accepts_right_rejects_wrong(check, right, wrong)


@pytest.mark.parametrize("check, wrong, explanation", [
    (ex.check_gbpo_target_ratios, (1.1427, 0.956), "MEDIAN"),     # centred on the mean
    (ex.check_gbpo_target_ratios, (1.2, 1.0), "sharp split"),     # T -> 0
    (ex.check_dispo_masked_tokens, {"e"}, "one-sided"),            # PPO's rule
    (ex.check_dispo_masked_tokens, {"a", "b", "c", "e"}, "inside their class"),
    (ex.check_bapo_exercise, (0.5390, 0.75), "every token"),
    (ex.check_bapo_exercise, (0.4978, 0.8), "reference code"),
    (ex.check_bapo_exercise, (0.3901, 0.7), "which step"),
    (ex.check_bapo_exercise, 0.39, "pair"),
    (ex.check_shaping_weights, (0.5, 0.9), "shaped value"),
    (ex.check_shaping_weights, (1.0, 1.0), "REINFORCE"),
    (ex.check_shaping_weights, (0.1, 0.9), "loss on p itself"),
])
def test_checks_explain_plausible_wrong_answers(check, wrong, explanation):
    explains(check, wrong, explanation)


def test_answers_follow_the_library():
    import math

    from workbench.viz.weight_surfaces import gradient_weight_surface as weight_surface

    sigma = 1 / (1 + math.exp(-1 / (math.sqrt(0.2) + 1e-6)))  # A_hat of the correct answer: 1 / Bessel std
    assert ex.gbpo_target_ratios() == pytest.approx((0.8 + 0.4 * sigma, 1.0))  # median 0: wrong -> rho* = 1
    assert ex.gbpo_target_ratios((1.0, 1.0, 1.0, 0.0, 0.0))[1] == pytest.approx(0.8 + 0.4 / (1 + math.e ** (1 / (
        math.sqrt(0.3) + 1e-6))))  # median 1: a wrong answer's target is pushed below 1
    masked = ex.dispo_masked_tokens()
    for label, (r, a) in ex.DISPO_EXERCISE_TOKENS.items():  # the same as the surface's zero cells
        assert (label in masked) == (weight_surface("dispo", [r], [a])[0, 0] == 0)
    assert ex.dispo_masked_tokens(eps_low_pos=0.3, eps_high_neg=0.35) == {"e"}
    assert ex.bapo_exercise() == pytest.approx((1.1 / 2.82, 0.75))
    assert ex.shaping_weights((0.1, 0.5), gamma=0.1) == pytest.approx((0.25, 0.05 / 0.36))
    assert ex.shaping_weights((0.3,)) == pytest.approx(
        tuple(weight_surface("policy-shaping", [1.0], [1.0], {"p_old": 0.3})[0]))
