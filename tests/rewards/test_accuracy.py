"""accuracy-reward: the verifiers (math-verify, exact, F1), signed rewards, reasoning delimiters, the environment's
verdict, and the catalog's properties."""
import sys

import pytest

from workbench import registry
from workbench.rewards import accuracy as acc
from workbench.rewards.accuracy import accuracy_reward, answer_f1, exact_verify_answer, final_answer, verify_answer

pytestmark = pytest.mark.covers("accuracy-reward")


def ready(verifier, request):
    """The verifier, once this case is skipped where it is "math" and math-verify is absent (exact and F1 need
    nothing and always run)."""
    if verifier == "math":
        request.getfixturevalue("math_verify")
    return verifier


def test_registered_with_trl_defaults():
    e = registry.get("reward", "accuracy-reward")
    assert e.defaults == {"verifier": "auto", "signed": False, "reasoning_delimiters": None}
    assert e.family == "rewards" and e.title.startswith("DeepSeek-R1") and e.equation


@pytest.mark.parametrize("verifier", ["math", "exact"])
def test_equivalent_forms_score_one(verifier, request):
    """Catalog test (1): "1/2" and "0.5" are one answer (LaTeX forms such as \\frac need math-verify)."""
    verifier = ready(verifier, request)
    cases = [(r"\boxed{0.5}", "1/2"), (r"\boxed{1/2}", "0.5"), (r"The answer is $\boxed{0.50}$", "1/2")]
    cases += [(r"\boxed{\frac{1}{2}}", "0.5"), (r"The answer is $\dfrac{2}{4}$", "1/2")] if verifier == "math" else []
    for text, gold in cases:
        assert verify_answer(text, gold, verifier=verifier) is True, (text, gold, verifier)
    assert verify_answer(r"\boxed{0.4}", "1/2", verifier=verifier) is False


@pytest.mark.usefixtures("math_verify")
def test_unparsable_completion_scores_zero_and_unparsable_gold_none():
    """Catalog test (2), TRL's convention: junk scores 0; a gold math-verify cannot parse makes the row None."""
    out = accuracy_reward(["no answer here", r"\boxed{46}", "", "caf\udce9"], solution=["46", "Paris", "7", "7"])
    assert out == [0.0, None, 0.0, 0.0]
    assert accuracy_reward(["46"], answer=[""], verifier="exact") == [None]
    assert accuracy_reward(["46"], answer=["  "], verifier="f1") == [None]


@pytest.mark.parametrize("verifier", ["math", "exact", "f1"])
def test_reward_depends_only_on_the_final_answer_span(verifier, request):
    """Catalog test (3): changing the reasoning before the final answer changes nothing."""
    verifier = ready(verifier, request)
    gold, right, wrong = ("red fox", "The answer is a red fox", "The answer is a blue cat") if verifier == "f1" else \
        ("46", r"The answer is $\boxed{46}$", r"The answer is $\boxed{47}$")
    for end in (right, wrong):
        values = {accuracy_reward([pre + end], solution=[gold], verifier=verifier)[0]
                  for pre in ["", "First 12 + 34 = 45, hmm. red fox? ", "Let me think: 3 * 7 = 21. \\boxed{21} no. "]}
        assert len(values) == 1, (end, values)
    assert accuracy_reward([right], solution=[gold], verifier=verifier) == [1.0]
    assert accuracy_reward([wrong], solution=[gold], verifier=verifier) == [0.0]


@pytest.mark.usefixtures("math_verify")
def test_math_verifier_needs_an_anchor_as_trl():
    """TRL's try_extract_without_anchor=False: a bare "46" is not read; "exact" reads it."""
    assert verify_answer("46", "46") is False
    assert verify_answer("46", "46", verifier="exact") is True
    assert verify_answer("The final answer is $46$", "46") is True


def test_exact_verifier_final_answer_span():
    assert final_answer("x <answer> 46 </answer> then 7") == (" 46 ", "answer")
    assert final_answer("Q: 2+2? A: 4.\nI am sure 5") == ("4.", "marker")
    assert final_answer("So the Answer is\n 12 apples\n13") == ("12 apples", "marker")
    assert final_answer("just 3 words") == ("just 3 words", "text")
    cases = [("46", "46", True), ("046", "46", True), ("The sum is 45, no, 46", "46", True),
             ("the answer is 46. Then 12", "46", True),
             ("<answer>x = 3 + 4 = 7</answer>", "7", True), ("metadata: 7 so 8", "8", True), ("QA: 7", "7", True),
             ("The ANSWER IS 9 and the answer is 10", "10", True), ("A: -3", "-3", True), ("5-3", "-3", False),
             ("1,000", "1000", True), ("<answer>Paris</answer>", "paris", True), ("Paris is big", "Paris", False),
             ("The answer is  New   York.", "new york", True), ("no digits", "4", False), ("3/0", "1", False)]
    for text, gold, expected in cases:
        assert exact_verify_answer(text, gold) is expected, (text, gold)


@pytest.mark.usefixtures("math_verify")
def test_signed_rewards_are_plus_minus_one():
    """FAPO's ±1: r -> 2r - 1, None stays None."""
    out = accuracy_reward([r"\boxed{2}", r"\boxed{3}", "x"], solution=["2", "2", "Paris"], signed=True)
    assert out == [1.0, -1.0, None]
    f1 = accuracy_reward(["<answer>the big red fox</answer>"], answer=["red fox"], verifier="f1", signed=True)
    assert f1 == [pytest.approx(2 * (2 * (2 / 3) * 1 / (2 / 3 + 1)) - 1)]


def test_token_f1_for_span_answers():
    assert answer_f1("<answer>The Eiffel Tower</answer>", "Eiffel Tower") == 1.0   # articles dropped (SQuAD)
    p, r = 2 / 3, 1.0
    assert answer_f1("<answer>big red fox</answer>", "red fox") == pytest.approx(2 * p * r / (p + r))
    assert answer_f1("A: blue", "red") == 0.0
    assert answer_f1("", "red") == 0.0 and answer_f1("red", "") is None
    assert accuracy_reward(["A: red fox!"], answer=["Red fox"], verifier="f1") == [1.0]


@pytest.mark.usefixtures("math_verify")
def test_reasoning_delimiters_as_trl():
    """Only the text after the last delimiter counts; no delimiter scores as wrong, before the gold is read."""
    texts = [r"<think>\boxed{46}</think> so \boxed{47}", r"<think>\boxed{47}</think> \boxed{46}",
             r"<think>\boxed{46} never closed", r"<think>x</think> \boxed{46}"]
    out = accuracy_reward(texts, solution=["46", "46", "46", "Paris"], reasoning_delimiters=["</think>"])
    assert out == [0.0, 1.0, 0.0, None]
    assert accuracy_reward([texts[2]], solution=["46"], reasoning_delimiters=["</think>"], signed=True) == [-1.0]
    # the first delimiter (in the given order) that occurs wins, split at its last occurrence
    both = r"a </r> \boxed{1} </think> \boxed{2} </r> \boxed{3}"
    assert accuracy_reward([both], solution=["3"], reasoning_delimiters=["</r>", "</think>"]) == [1.0]
    assert accuracy_reward([both], solution=["2"], reasoning_delimiters=["</think>", "</r>"]) == [0.0]


@pytest.mark.usefixtures("math_verify")
def test_auto_takes_the_environments_verdict_when_given():
    """Our pipeline passes `scores`: accuracy is scores >= 1 and no gold is read; TRL passes none: math-verify."""
    out = accuracy_reward(["a", "b", "c", "d"], scores=[1.0, 0.0, 0.5, float("nan")])
    assert out == [1.0, 0.0, 0.0, None]
    assert accuracy_reward(["a"], scores=[1.0], signed=True, reasoning_delimiters=["</think>"]) == [-1.0]
    assert accuracy_reward([r"\boxed{4}"], scores=[0.0], solution=["4"], verifier="math") == [1.0]
    with pytest.raises(ValueError, match="accuracy-reward.*'solution' or 'answer'"):
        accuracy_reward(["46"])
    with pytest.raises(ValueError, match="scores has 1 rows for 2 completions"):
        accuracy_reward(["a", "b"], scores=[1.0])


def test_solved_is_the_one_rule_for_the_environments_verdict():
    """base.solved: score >= 1; None or NaN is no verdict (lists); tensors give a bool tensor (NaN: unsolved)."""
    import numpy as np
    import torch

    from workbench.rewards.base import correctness, solved

    assert solved([1.0, 0.999, 2, None, float("nan"), np.float32("nan"), np.float64(1.0), True]) == [
        True, False, True, None, None, None, True, True]
    assert solved(torch.tensor([1.0, 0.5, float("nan")], dtype=torch.float64)).tolist() == [True, False, False]
    with pytest.raises(ValueError, match="scores has 2 rows for 3"):
        solved([1.0, 0.0], expected=3)
    assert correctness(["a", "b"], reward="r", scores=torch.tensor([1.0, 0.0])) == [True, False]


def test_bad_options_are_refused_before_anything_runs():
    with pytest.raises(ValueError, match="verifier must be one of"):
        accuracy_reward(["46"], answer=["46"], verifier="regex")
    with pytest.raises(ValueError, match="reasoning_delimiters"):
        accuracy_reward(["46"], answer=["46"], reasoning_delimiters="</think>")
    with pytest.raises(ValueError, match="verifier must be 'math' or 'exact'"):
        verify_answer("46", "46", verifier="f1")


def test_math_verifier_without_math_verify_names_the_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "math_verify", None)  # import math_verify -> ImportError
    acc.parsed_gold.cache_clear()
    with pytest.raises(ImportError, match="pip install math-verify"):
        verify_answer(r"\boxed{1}", "1")
    assert verify_answer("1", "1", verifier="exact") is True  # the dependency-free mode still works
    acc.parsed_gold.cache_clear()


@pytest.mark.parametrize("verifier", ["math", "exact", "f1"])
def test_long_adversarial_completions_get_their_scores(verifier, request):
    """150k unclosed boxes, 500k numbers, a million letters (their time per size: bench/bench_parsers.py). No answer
    in an unclosed box or in letters: 0 by every verifier; "1 1 ... 1": the exact verifier reads the last number (1),
    the token F1 is 2 P R / (P + R) with P = 1 / 500000, R = 1; math-verify decides for itself, within [0, 1]."""
    expected = {("\\boxed{", "math"): 0.0, ("\\boxed{", "exact"): 0.0, ("\\boxed{", "f1"): 0.0,
                ("1 ", "exact"): 1.0, ("1 ", "f1"): 2 / 500_001,
                ("x", "math"): 0.0, ("x", "exact"): 0.0, ("x", "f1"): 0.0}
    verifier = ready(verifier, request)
    for unit, n in [("\\boxed{", 150_000), ("1 ", 500_000), ("x", 1_000_000)]:
        (value,) = accuracy_reward([unit * n], solution=["1"], verifier=verifier)
        if (unit, verifier) in expected:
            assert value == pytest.approx(expected[unit, verifier], rel=1e-12), unit
        else:
            assert value is not None and 0.0 <= value <= 1.0
