"""Group sampling on the tiny model: layout, rewards and the behaviour log-probs."""
import random

import torch

from workbench.rollout import policy_forward, sample_groups
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
