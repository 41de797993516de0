"""Group sampling on the tiny model: layout, rewards and the behaviour log-probs."""
import random

import pytest
import torch

from workbench.rollout import policy_forward, sample_groups
from workbench.rollout.group import subgroup_sizes
from workbench.tasks import get_task


def test_group_sampling_layout_rewards_and_behaviour_logprobs(engine):
    task = get_task("addition")
    examples = task.sample(3, random.Random(0))
    torch.manual_seed(0)
    batch = sample_groups(engine, task, examples, group_size=4, max_new_tokens=5, temperature=0.8)
    assert batch.size == 12 and batch.group.tolist() == [0] * 4 + [1] * 4 + [2] * 4
    assert batch.prompts[4] == examples[1].prompt and len(batch.completions) == 12
    assert batch.rewards.tolist() == task.rewards(batch.completions, [e for e in examples for _ in range(4)])
    # pad after EOS, and truncated rows are exactly those without EOS
    eos, pad = engine.tokenizer.eos_token_id, engine.tokenizer.pad_token_id
    assert torch.all(batch.response_ids[batch.mask == 0] == pad)
    assert batch.truncated.tolist() == [bool((row != eos).all()) for row in batch.response_ids]
    # the engine's log-probs of its own samples equal the trainer's forward pass at the same temperature
    logp, _, _ = policy_forward(engine.model, batch.prompt_ids, batch.prompt_mask, batch.response_ids,
                                batch.mask, temperature=0.8)
    assert torch.allclose(logp * batch.mask, batch.mu_logp, atol=1e-5)


def test_groups_split_into_subgroups_as_evenly_as_possible():
    """HBPO's budget subgroups and A2FM's mode subgroups: the first G mod k take one more row."""
    assert subgroup_sizes(16, 4, who="hbpo-reward", what="budgets") == [4, 4, 4, 4]
    assert subgroup_sizes(6, 4, who="hbpo-reward", what="budgets") == [2, 2, 1, 1]
    with pytest.raises(ValueError, match=r"apo-a2fm splits each group into 3 subgroups \(modes\): group_size must "
                                         r"be >= 3, got 2"):
        subgroup_sizes(2, 3, who="apo-a2fm", what="modes")
