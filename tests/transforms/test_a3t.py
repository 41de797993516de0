"""A^3T's accumulated successes: the buffer keeps every success (never a failure), its count never decreases across
rounds until the capacity, and each step appends stored successes of earlier rounds only, in one extra group."""
import copy

import pytest
import torch

from tests.helpers import group_batch, step_context
from workbench import registry
from workbench.transforms.a3t import a3t, check_a3t

pytestmark = pytest.mark.covers("a3t")


def step(rewards, n_step, state, **kw):
    """One round: groups of 2 rows, rewards = scores, answers "r{step}.{i}"."""
    batch = group_batch(rewards, [i // 2 for i in range(len(rewards))])
    batch.scores, batch.prompts = batch.rewards.clone(), [f"q{i // 2}" for i in range(len(rewards))]
    batch.completions = [f"r{n_step}.{i}" for i in range(len(rewards))]
    ctx = step_context(step=n_step, group_size=2, prompts_per_step=len(rewards) // 2, state=state)
    return a3t(batch, ctx, **kw), ctx


def test_stored_successes_never_decrease_across_rounds_until_capacity():
    state, sizes = {}, []
    rounds = [[1.0, 0.0, 0.0, 0.0], [0.0] * 4, [1.0, 1.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0], [1.0] * 4, [1.0] * 4]
    for n, rewards in enumerate(rounds):
        _, ctx = step(rewards, n, state, capacity=8)
        sizes.append(int(ctx.metrics["a3t/stored_successes"]))
    assert sizes == [1, 1, 4, 5, 8, 8]  # cumulative successes 1, 1, 4, 5, 9, 13, capped at 8
    buffer = state["buffer"]
    assert all(e.reward > 0.5 for e in buffer.entries)  # failures are never stored
    assert [e.row.completions[0] for e in buffer.entries][-4:] == ["r5.0", "r5.1", "r5.2", "r5.3"]  # newest kept


def test_each_step_appends_stored_successes_of_earlier_rounds_in_one_extra_group():
    state = {}
    out0, ctx0 = step([1.0, 0.0, 0.0, 1.0], 0, state, replay=3)
    assert out0.size == 4 and ctx0.metrics["a3t/replayed_rows"] == 0.0  # round 0: nothing stored before it
    out1, ctx1 = step([0.0, 0.0, 1.0, 0.0], 1, state, replay=3)
    assert out1.size == 6 and sorted(out1.completions[4:]) == ["r0.0", "r0.3"]  # only earlier rounds' successes
    assert out1.group.tolist() == [0, 0, 1, 1, 2, 2] and out1.rewards[4:].tolist() == [1.0, 1.0]
    assert out1.completions[:4] == ["r1.0", "r1.1", "r1.2", "r1.3"]  # the step's own rows, failures included
    assert ctx1.metrics == {"a3t/replayed_rows": 2.0, "a3t/stored_successes": 3.0, "a3t/step_success": 0.25}


def test_replay_zero_stores_without_replaying_and_draws_repeat_on_a_resumed_run():
    state = {}
    for n in range(3):
        out, _ = step([1.0, 0.0, 1.0, 1.0], n, state, replay=0)
        assert out.size == 4
    a, _ = step([0.0] * 4, 3, copy.deepcopy(state), replay=4)
    b, _ = step([0.0] * 4, 3, copy.deepcopy(state), replay=4)
    assert a.completions == b.completions and len(a.completions) == 8
    assert torch.equal(a.response_ids, b.response_ids)


def test_registration_and_bad_settings():
    entry = registry.get("group_transform", "a3t")
    assert entry.defaults == {"capacity": 4096, "replay": 16, "success": 0.5} and entry.state is dict
    with pytest.raises(ValueError, match="capacity must be an integer >= 1"):
        check_a3t(capacity=0)
    with pytest.raises(ValueError, match="replay must be an integer >= 0"):
        check_a3t(replay=-1)
    with pytest.raises(ValueError, match="success must be a reward threshold"):
        check_a3t(success=None)
