"""SPO-tree's rollout with the tiny model: one row per root-to-leaf path, shared prefixes tagged and counted once,
rows the trainer scores exactly as sampled; and SPO-chain's continuations from the same engine."""
import math

import pytest
import torch

from workbench.advantages.spo import (
    segment_runs,
    spo_chain_values,
    spo_segment,
    tree_structure,
)
from workbench.context import StepContext
from workbench.rollout import Sampling, policy_forward, sample_groups
from workbench.rollout.spo_tree import spo_tree
from workbench.tasks import get_task

pytestmark = pytest.mark.covers("spo-segment")


@pytest.fixture(scope="module")
def task_examples():
    task = get_task("addition")
    return task, task.eval_set(3)


def test_tree_rows_are_paths_with_shared_prefixes_trained_once(engine, task_examples):
    task, examples = task_examples
    torch.manual_seed(0)
    batch = spo_tree(engine, task, examples, group_size=4, sampling=Sampling(5), branch_factors=(2, 3),
                     segment_tokens=2)
    _, paths = segment_runs(batch.segment)
    parent, children = tree_structure(paths, batch.group.tolist())       # a tree per group (or it raises)
    assert batch.size <= 3 * 2 * 3 and sorted(set(batch.group.tolist())) == [0, 1, 2]
    for g in range(3):
        assert len(children[("root", g)]) == 2                             # branch factor 2 at the root
    assert all(len(kids) == 3 for node, kids in children.items() if not isinstance(node, tuple))   # then 3
    lengths = (batch.segment >= 0).sum(-1)
    assert int(lengths.max()) <= 5                                         # the run's budget for the whole path
    for i, path in enumerate(paths):
        for node in path[:-1]:                                             # inner nodes: M tokens, cut there
            assert int((batch.segment[i] == node).sum()) == 2
    # every node's tokens are trained in exactly one row
    for node in parent:
        owners = ((batch.segment == node) & (batch.mask > 0)).any(-1).sum()
        assert int(owners) == 1
    assert [task.score(c, examples[g]) for c, g in zip(batch.completions, batch.group.tolist())] == \
        batch.rewards.tolist()
    # the trainer scores exactly the sampled tokens: its log-probs are the engine's, on every trained token
    logp, _, _ = policy_forward(engine.model, batch.prompt_ids, batch.prompt_mask, batch.response_ids, batch.mask)
    on = batch.mask > 0
    torch.testing.assert_close(logp[on], batch.mu_logp[on], rtol=1e-4, atol=1e-4)
    batch.old_logp = logp * batch.mask
    assert bool(torch.isfinite(spo_segment(batch)).all())
    torch.manual_seed(0)
    every = spo_tree(engine, task, examples, group_size=4, sampling=Sampling(5), branch_factors=(2, 3),
                     segment_tokens=2, shared="per_path")
    assert torch.equal(every.segment, batch.segment) and torch.equal(every.mask, (every.segment >= 0).float())


def test_tree_settings_are_checked(engine, task_examples):
    task, examples = task_examples
    with pytest.raises(ValueError, match="leave nothing"):
        spo_tree(engine, task, examples, group_size=4, sampling=Sampling(4), branch_factors=(2, 2, 2),
                 segment_tokens=2)
    with pytest.raises(ValueError, match="branch_factors"):
        spo_tree(engine, task, examples, group_size=4, sampling=Sampling(4), branch_factors=(2, 0))
    with pytest.raises(ValueError, match="multi-turn"):
        spo_tree(engine, get_task("gridworld"), get_task("gridworld").eval_set(1), group_size=4,
                 sampling=Sampling(4), branch_factors=(2,), segment_tokens=2)


def test_chain_continues_token_prefixes_with_the_engine(engine, task_examples):
    task, examples = task_examples
    torch.manual_seed(1)
    batch = sample_groups(engine, task, examples, group_size=3, max_new_tokens=5)
    logp, _, _ = policy_forward(engine.model, batch.prompt_ids, batch.prompt_mask, batch.response_ids, batch.mask)
    batch.old_logp = logp * batch.mask
    ctx = StepContext(step=0, total_steps=1, seed=0, group_size=3, prompts_per_step=3, max_new_tokens=5,
                      examples=examples, task=task, engine=engine)
    out = spo_chain_values(batch, ctx, cutpoint_interval=2, mc_samples=2)
    known = out.segment_values[~out.segment_values.isnan()]
    assert bool(((known >= 0) & (known <= 1)).all()) and not bool(out.segment_values[:, 0].isnan().any())
    assert bool(((out.segment >= 0) == (batch.mask > 0)).all())          # every response token has a segment
    assert ctx.metrics["spo/continuations"] >= 3 * 2                        # at least V(s_0) of each prompt
    assert math.isfinite(float(spo_segment(out).abs().sum()))
