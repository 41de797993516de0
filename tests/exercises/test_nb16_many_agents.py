"""Notebook 16's exercise checks accept the right answer and explain a wrong one; the answers follow the library."""
from fractions import Fraction

import pytest

from tests.exercises.checks import explains
from workbench.envs.games import kuhn
from workbench.exercises import nb16_many_agents as ex


@pytest.mark.parametrize("check, right, wrong", [
    (ex.check_kuhn_exploitability, [1, 1 / 3, 2 / 3], [1, 1 / 3, 4 / 3]),
    (ex.check_dr_mas, [1, -1, 0], [1.2247, -1.2247, 0]),
    (ex.check_mars_shift, [0.125, 0.875], [0.5, 0.5]),
    (ex.check_ssp_rewards, [0, 0.6, 1, 0, 0.96, 0], [1, 0.4, 0, 0, 0.96, 0]),
], ids=lambda x: getattr(x, "__name__", None))
def test_checks_accept_right_and_reject_wrong(check, right, wrong):
    assert check(right).startswith("correct")
    for bad in (wrong, "x", [1, "a"], 0.5):
        with pytest.raises(AssertionError, match="not quite"):
            check(bad)


@pytest.mark.parametrize("check, wrong, explanation", [
    (ex.check_kuhn_exploitability, [1, 1 / 3, 4 / 3], "half of it"),
    (ex.check_kuhn_exploitability, [0, 4 / 3, 2 / 3], "gains BR_i - u_i"),
    (ex.check_kuhn_exploitability, [3, 1, 2 / 3], "average the best response's value"),
    (ex.check_kuhn_exploitability, [1, 1 / 3], "three numbers"),
    (ex.check_dr_mas, [0.0883, -0.4413, -0.1765], "GRPO's advantage"),
    (ex.check_dr_mas, [1.2247, -1.2247, 0], "Bessel std"),
    (ex.check_dr_mas, [0.1, -0.1, 0], "divided by the agent's std"),
    (ex.check_mars_shift, [0.5, 0.5], "mean over the tokens"),
    (ex.check_mars_shift, [1 / 6, 5 / 6], "padding"),
    (ex.check_mars_shift, [2.5 / 6, 1 - 2.5 / 6], "count each distinct value once"),
    (ex.check_mars_shift, [0.125, 1.125], "minus the mean"),
    (ex.check_ssp_rewards, [1, 0.4, 0, 0, 0.96, 0], "1 - p, not p"),
    (ex.check_ssp_rewards, [0, 0.6, 1, 0, 0.24, 0], "factor 4"),
    (ex.check_ssp_rewards, [0, 0.6, 1, 0, 0.96, 1], "earns 0"),
    (ex.check_ssp_rewards, [0, 0.6, 1], "six numbers"),
])
def test_checks_explain_plausible_wrong_answers(check, wrong, explanation):
    explains(check, wrong, explanation)


@pytest.mark.covers("kuhn")
def test_the_kuhn_answer_is_the_hand_computed_one_in_exact_arithmetic():
    s0 = {name: Fraction(1) for name in kuhn.INFOSETS[0]}   # always bet / call
    s1 = {name: Fraction(0) for name in kuhn.INFOSETS[1]}   # always check / fold
    assert kuhn.best_response_value(s1, 0) == 1 and kuhn.best_response_value(s0, 1) == Fraction(1, 3)
    assert kuhn.exploitability(s0, s1) == Fraction(2, 3)
    assert ex.kuhn_values() == pytest.approx([1, 1 / 3, 2 / 3])
    assert ex.kuhn_values(player0="p") == pytest.approx([1, float(kuhn.best_response_value(
        {name: 0 for name in kuhn.INFOSETS[0]}, 1)), float(kuhn.exploitability(
            {name: 0 for name in kuhn.INFOSETS[0]}, s1))])


@pytest.mark.covers("dr-mas", "mars", "ssp")
def test_the_other_answers_are_the_hand_computed_ones():
    assert ex.dr_mas_verifier() == pytest.approx([0.1 / (0.1 + 1e-6), -0.1 / (0.1 + 1e-6), 0.0])
    assert ex.dr_mas_verifier(verifier=(0.5, 0.5, 0.8)) == pytest.approx([-0.57735, -0.57735, 1.1547], abs=1e-4)
    assert ex.mars_shift() == [0.125, 0.875]
    assert ex.mars_shift(returns=(2.0, 2.0)) == [1.0, 0.0]  # distinct values {0, 2}
    assert ex.ssp_rewards() == pytest.approx([0, 0.6, 1, 0, 0.96, 0])
    assert ex.ssp_rewards(attempts=((1, 0), (0, 0))) == pytest.approx([0.5, 1, 1, 0])
