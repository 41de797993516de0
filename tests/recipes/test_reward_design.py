"""The reward-hacking recipes of notebook 12: whether CGPO's judges flag the task's own right answers."""
import random
from types import SimpleNamespace

import torch

from workbench.batch import RolloutBatch
from workbench.recipes import get_recipe
from workbench.rewards.judges import violations
from workbench.tasks.countdown import CountdownTask


def flags_of_expert_answers(recipe: str):
    """The recipe's judges on 2000 expert countdown targets (one token per character, plus EOS) and one answer
    padded to the budget of 10 tokens; returns (flags, lengths)."""
    task, rng = CountdownTask(), random.Random(0)
    lengths = [len(task.make_example(rng).target) + 1 for _ in range(2000)] + [10]
    batch = RolloutBatch.from_rewards(torch.ones(len(lengths)), lengths=lengths)
    batch.truncated = torch.zeros(batch.size, dtype=torch.bool)
    cgpo = next(u for u in get_recipe(recipe).reward_shaping if u.key == "cgpo")
    ctx = SimpleNamespace(max_new_tokens=10, metrics={})
    flagged, _ = violations(batch, ctx, cgpo.kw["judges"], {"length": {"max_fraction": cgpo.kw["max_length_fraction"]}})
    return flagged, torch.tensor(lengths)


def test_length_bias_cgpo_passes_every_right_answer_and_flags_padding():
    flagged, lengths = flags_of_expert_answers("length-bias-cgpo")
    assert lengths[:-1].max() == 8 and not flagged[:-1].any() and flagged[-1]


def test_the_tight_judge_also_flags_the_longest_right_answers():
    """At 3/4 of the budget (7.5 tokens) every 8-token right answer is flagged: about 30% of countdown targets."""
    flagged, lengths = flags_of_expert_answers("length-bias-cgpo-tight")
    assert torch.equal(flagged[:-1], lengths[:-1] == 8) and 0.2 < flagged[:-1].double().mean() < 0.4
