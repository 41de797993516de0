"""The hackable proxy of notebook 12: a reward model's length bias."""
import pytest

from workbench import registry


def test_length_bias_is_the_share_of_the_budget_used():
    fn = registry.get("reward", "length-bias").fn
    assert fn(["a", "bb", "c"], completion_ids=[[1], [1, 2, 3, 4], [1] * 12], max_new_tokens=8) == [0.125, 0.5, 1.0]
    assert fn(["a"], completion_ids=[[1, 2]], max_len=4) == [0.5]  # a TRL user names the budget
    with pytest.raises(ValueError, match="length-bias needs the budget L"):
        fn(["a"], completion_ids=[[1]])


def test_padding_a_wrong_answer_beats_a_short_right_one_only_under_the_bias():
    """Verifier + bias: a wrong answer at the budget earns 1.0, a right one of 6 of 10 tokens 1.6, a wrong one of
    6 tokens 0.6: within the wrong answers, padding is the gradient's direction."""
    fn = registry.get("reward", "length-bias").fn
    right, wrong_short, wrong_long = fn(["", "", ""], completion_ids=[[1] * 6, [1] * 6, [1] * 10], max_new_tokens=10)
    assert (1 + right, 0 + wrong_short, 0 + wrong_long) == (1.6, 0.6, 1.0)
