"""The hackable proxy of notebook 12: a reward model's length bias."""
import pytest
import torch

from tests.train.test_pipeline import reward_stage
from workbench import registry
from workbench.recipes.base import use


def test_length_bias_is_the_share_of_the_budget_used():
    fn = registry.get("reward", "length-bias").fn
    assert fn(["a", "bb", "c"], completion_ids=[[1], [1, 2, 3, 4], [1] * 12], max_new_tokens=8) == [0.125, 0.5, 1.0]
    assert fn(["a"], completion_ids=[[1, 2]], max_len=4) == [0.5]  # a TRL user names the budget
    with pytest.raises(ValueError, match="reward 'length-bias' needs its length budget: pass max_len"):
        fn(["a"], completion_ids=[[1]])
    with pytest.raises(ValueError, match="max_len must be an int >= 1"):  # 0: no silent fallback
        fn(["a"], completion_ids=[[1]], max_len=0, max_new_tokens=8)
    with pytest.raises(ValueError, match="completion_ids"):
        fn(["a", "b"], completion_ids=[[1]], max_len=4)


def test_through_the_reward_stage_padding_eats_the_verifiers_margin():
    """The pipeline's reward stage sums the verifier (weight 1) and the bias |y| / L (L = max_new_tokens = 4). In
    prompt group 0 a right answer of 3 tokens meets a wrong one at the budget (4 tokens): the verifier alone
    separates them by 1, the sum only by 1 - 1/4, and the bias alone ranks the padded wrong answer first."""
    lengths = torch.tensor([3.0, 4.0, 2.0])  # reward_stage's rows: tokens up to and including EOS
    biased = reward_stage([use("length-bias", weight=1.0)])
    assert biased.scores.tolist() == [1.0, 0.0, 1.0]  # the environment's verdict, kept apart
    torch.testing.assert_close(biased.rewards, biased.scores + lengths / 4)
    assert float(biased.rewards[0] - biased.rewards[1]) == pytest.approx(0.75)
    alone = reward_stage([use("length-bias", weight=1.0)], task_reward=0.0)
    assert float(alone.rewards[1]) > float(alone.rewards[0])
