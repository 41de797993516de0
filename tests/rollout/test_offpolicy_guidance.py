"""Off-policy guidance (LUFFY): G - 1 samples plus the task's reference solution per group, marked off-policy."""
import random

import pytest
import torch

from tests.helpers import CallTask
from workbench import registry
from workbench.rollout import Sampling, turns
from workbench.rollout.offpolicy_guidance import offpolicy_guidance
from workbench.rollout.turns import action_ids
from workbench.tasks import get_task

pytestmark = pytest.mark.covers("policy-shaping")






def test_registered_as_the_methods_rollout():
    entry = registry.get("rollout", "policy-shaping")
    assert "offpolicy_mask" in entry.provides and entry.defaults == {}


def test_each_group_ends_with_the_reference_solution_scored_by_the_verifier(engine):
    task, G = get_task("addition"), 4
    examples = task.sample(3, random.Random(0))
    sampling = Sampling(6, temperature=1.0)
    torch.manual_seed(2)
    batch = offpolicy_guidance(engine, task, examples, group_size=G, sampling=sampling)
    assert batch.size == 3 * G and batch.group.tolist() == [g for g in range(3) for _ in range(G)]
    tok = engine.tokenizer
    for g, example in enumerate(examples):
        row = g * G + G - 1
        ids = action_ids(tok, example.target)  # the target then EOS, as a sampled answer ends
        n = len(ids)
        assert batch.response_ids[row, :n].tolist() == ids and batch.mask[row].sum().item() == n
        assert torch.equal(batch.offpolicy_mask[row], batch.mask[row])
        assert batch.rewards[row].item() == 1.0 and batch.completions[row] == example.target
        assert not batch.truncated[row]
    sampled = batch.group >= 0
    sampled[G - 1::G] = False
    assert batch.offpolicy_mask[sampled].abs().sum() == 0
    # the sampled rows are the plain rollout's with G - 1 samples per prompt
    torch.manual_seed(2)
    plain = turns(engine, task, examples, group_size=G - 1, sampling=sampling)
    T = plain.response_ids.shape[1]
    assert torch.equal(batch.response_ids[sampled][:, :T], plain.response_ids)
    assert torch.equal(batch.mu_logp[sampled][:, :T], plain.mu_logp)
    assert batch.rewards[sampled].tolist() == plain.rewards.tolist()
    # the reference rows' mu_logp are the policy's own log-probs: no mismatch, no IS weight on them
    refs = batch.select(torch.arange(G - 1, 3 * G, G))
    assert torch.allclose(refs.mu_logp, engine.logprobs(refs, 1.0), atol=1e-6)
    assert (refs.mu_logp[refs.mask > 0] < 0).all()


def test_a_multi_turn_reference_keeps_observations_off_the_masks(engine):
    task = CallTask(("go;", "go;", "end"), call_reward=0.25)
    examples = task.sample(2, random.Random(1))
    batch = offpolicy_guidance(engine, task, examples, group_size=2, sampling=Sampling(4))
    ref = batch.select(torch.tensor([1, 3]))
    assert ref.rewards.tolist() == [1.5, 1.5]  # 0.25 + 0.25 + 1 over the episode's steps
    assert ref.turn_rewards.tolist() == [[0.25, 0.25, 1.0], [0.25, 0.25, 1.0]]
    assert ref.completions[0] == "go;ok1\ngo;ok2\nend"
    assert torch.equal(ref.offpolicy_mask, ref.mask)
    observation = (ref.turn >= 0) & (ref.mask == 0)
    assert observation.any() and (ref.offpolicy_mask[observation] == 0).all()
    assert ref.turn[0, :ref.mask[0].gt(0).nonzero().max() + 1].max().item() == 2  # three steps: 0, 1, 2


def test_greedy_is_the_plain_rollout_and_one_sample_groups_are_refused(engine):
    task = get_task("addition")
    examples = task.sample(2, random.Random(0))
    greedy = offpolicy_guidance(engine, task, examples, group_size=1, sampling=Sampling(6, greedy=True))
    assert greedy.offpolicy_mask is None and greedy.size == 2
    with pytest.raises(ValueError, match="needs group_size >= 2"):
        offpolicy_guidance(engine, task, examples, group_size=1, sampling=Sampling(6))
