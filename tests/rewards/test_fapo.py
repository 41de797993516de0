"""FAPO: the flawed-positive penalty (rule reward +-1, 0 for a flagged correct answer) and the GenRM's reward."""
import random

import pytest

from workbench.rewards.fapo import (arithmetic_steps, fapo, fapo_genrm, fapo_score, first_wrong_step, flaw_index,
                                    genrm_score, parse_step_index)

pytestmark = pytest.mark.covers("fapo")


def test_toy_detector_finds_the_earliest_false_step_of_a_chain():
    assert arithmetic_steps("3+4=7, 7*2=14") == [(3, "+", 4, 7), (7, "*", 2, 14)]
    assert arithmetic_steps("3 + 4 = 7*2 = 14") == [(3, "+", 4, 7), (7, "*", 2, 14)]  # a chain: two steps
    assert arithmetic_steps("5-8=-3 and x=-2*3=-6") == [(5, "-", 8, -3), (-2, "*", 3, -6)]
    assert arithmetic_steps("2*3+4=10") == []          # "3+4=10" is no step: 3 follows an operator
    assert first_wrong_step("3+4=7, 7*2=14") == -1
    assert first_wrong_step("3+4=7, 7*2=15, 15-1=14") == 1
    assert first_wrong_step("3+4=8, 8*2=16") == 0
    assert first_wrong_step("A:14") == -1                  # no steps, no flaw
    assert len(arithmetic_steps("1+1=2 " * 5000)) == 1000  # the toy reads a bounded number of steps


@pytest.mark.parametrize("text", ["1.5+2=3.5", "1,000+1=1001", "a2+2=4", "2^3+1=9", "6/2+1=4", "2+2=4.5",
                                  "0.5*4=2.0"])
def test_decimals_thousands_names_and_powers_hold_no_integer_step(text):
    """Each is right (or not integer arithmetic); reading "5+2=3", "000+1=1001", "3+1=9", "2+1=4" or "2+2=4"
    ending in ".5" out of it would flag a correct answer as a flawed positive."""
    assert arithmetic_steps(text) == [] and first_wrong_step(text) == -1
    assert fapo([text + " A:1"], scores=[1.0]) == [1.0]


def test_integer_steps_next_to_decimals_and_punctuation_are_still_read():
    assert arithmetic_steps("x = 1.5, so 2+2=5.") == [(2, "+", 2, 5)]          # a sentence's full stop
    assert arithmetic_steps("3+4=7, 7*2=14.") == [(3, "+", 4, 7), (7, "*", 2, 14)]
    assert first_wrong_step("1,000 items: 3*4=12, 12-2=11") == 1


def test_reward_is_plus_minus_one_and_zero_for_flawed_positives():
    completions = ["3+4=7, 7*2=14 A:14", "3+4=8, 8*2=14 A:14", "3+4=7 A:9", "A:14"]
    logged = {}
    out = fapo(completions, scores=[1.0, 1.0, 0.0, 1.0], log_metric=logged.__setitem__)
    assert out == [1.0, 0.0, -1.0, 1.0]
    assert logged == {"flawed_frac": pytest.approx(1 / 3)}  # one of the three correct rows is flawed


def test_values_stay_in_minus_one_zero_one():
    rng = random.Random(0)
    for _ in range(200):
        a, b = rng.randrange(20), rng.randrange(20)
        text = f"{a}+{b}={a + b + rng.choice([0, 0, 1])} A:{a + b}"
        assert fapo([text], scores=[float(rng.random() < 0.5)])[0] in (-1.0, 0.0, 1.0)


def test_incorrect_answers_never_reach_the_detector():
    calls = []

    def detector(completion, *, prompt=None, answer=None):
        calls.append((completion, prompt, answer))
        return 2

    out = fapo(["right", "wrong", "right too"], scores=[1.0, 0.0, 1.0], prompts=["p0", "p1", "p2"],
               answer=["a0", "a1", "a2"], detector=detector)
    assert out == [0.0, -1.0, 0.0]
    assert calls == [("right", "p0", "a0"), ("right too", "p2", "a2")]  # the GenRM sees problem and ground truth


def test_unusable_detector_output_counts_as_no_flaw_and_unknown_correctness_as_none():
    assert fapo(["x"], scores=[1.0], detector=lambda c, **_: None) == [1.0]
    assert fapo(["x"], scores=[1.0], detector=lambda c, **_: -1) == [1.0]
    assert fapo(["x", "y"], scores=[float("nan"), 0.0]) == [None, -1.0]
    assert fapo_score(True, 0, penalty=0.5) == 0.5  # the penalty subtracts (verl-recipe FLAWED_REWARD_PENALTY)
    with pytest.raises(ValueError, match="penalty"):
        fapo(["x"], scores=[1.0], penalty=-1)


def test_genrm_reward_is_one_only_at_the_exact_step_and_linear_in_the_distance():
    T = 8
    for label in range(T):
        values = [genrm_score(p, label, T) for p in range(T)]
        assert values[label] == 1.0 and sum(v == 1.0 for v in values) == 1
        assert values == pytest.approx([1 - abs(p - label) / T for p in range(T)])
        assert genrm_score(-1, label, T) == -1.0          # missed the error
        assert genrm_score(None, label, T) == -1.0        # invalid answer
    assert genrm_score(-1, -1, T) == 1.0 and genrm_score(3, -1, T) == -1.0  # no error: only -1 is right


def test_flaw_index_is_the_int_in_the_last_box_without_a_range_check():
    assert flaw_index(r"step 2 looks off... \boxed{2}") == 2 and flaw_index(r"\boxed{1} no, \boxed{-1}") == -1
    assert flaw_index(r"\boxed{17}") == 17 and flaw_index(r"\boxed{-2}") == -2          # no range on the policy path
    assert flaw_index(r"\boxed{two}") is None and flaw_index("no box") is None and flaw_index(r"\boxed{3") is None
    assert flaw_index(r"\boxed{3}" + "x" * 400) == 3                                   # the whole answer is read


def test_genrm_answers_are_parsed_from_the_last_box_in_range():
    assert parse_step_index(r"step 2 looks off... \boxed{2}", 5) == 2
    assert parse_step_index(r"\boxed{1} no wait \boxed{-1}", 5) == -1
    assert parse_step_index(r"\boxed{5}", 5) is None and parse_step_index(r"\boxed{-2}", 5) is None
    assert parse_step_index(r"\boxed{two}", 5) is None and parse_step_index("no box", 5) is None
    assert parse_step_index(r"\boxed{3}" + "x" * 400, 5) is None  # only the last 300 characters are read
    out = fapo_genrm([r"\boxed{1}", r"\boxed{-1}", "junk"], ground_truth=[3, -1, 0], num_steps=[4, 4, 4])
    assert out == [0.5, 1.0, -1.0]
    assert fapo_genrm([r"\boxed{0}"], ground_truth=["0"], extra_info=[{"total_steps": 2}]) == [1.0]
    with pytest.raises(ValueError, match="extra_info"):
        fapo_genrm(["x"], ground_truth=[0])


def test_genrm_labels_come_from_ground_truth_only_and_must_be_step_indices():
    with pytest.raises(ValueError, match="ground_truth"):  # our gold answers are no step labels
        fapo_genrm([r"\boxed{0}"], answer=["0"], solution=["0"], num_steps=[2])
    for label in (4, -2):
        with pytest.raises(ValueError, match=r"ground_truth label .* \[0, num_steps\) or -1.* row 0 has"):
            fapo_genrm([r"\boxed{0}"], ground_truth=[label], num_steps=[4])


def test_without_scores_a_toy_answer_is_verified_exactly_as_trl_calls_it():
    """TRL passes no `scores`: the default verifier ("auto") reads the toy's "A:14"; math-verify reads no such
    answer, so under verifier="math" every row is wrong (-1)."""
    completions = ["3+4=7, 7*2=14 A:14", "3+4=8, 8*2=14 A:14", "A:15", "x"]
    assert fapo(completions, solution=["14"] * 4) == [1.0, 0.0, -1.0, -1.0]
    assert fapo(completions, answer=["14"] * 4, verifier="math") == [-1.0] * 4
    with pytest.raises(ValueError, match="verifier"):
        fapo(completions, solution=["14"] * 4, verifier="exact-ish")
