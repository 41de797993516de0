"""ReMix's mix-policy batch: whole groups of the last k steps added at share p with their behaviour log-probs, p = 0
the plain batch, nothing replayed from the reincarnation step on, the same draws on a resumed run, and refusals."""
import copy
import pickle

import pytest
import torch

from tests.helpers import group_batch, step_context
from workbench.advantages.group import grpo
from workbench.tasks import Example
from workbench.transforms.remix import check_remix, offpolicy_groups, remix

pytestmark = pytest.mark.covers("remix")
G = 2


def fresh(n_step: int, prompts=("a", "b")):
    """One group of G rows per prompt; rewards 1, 0 in each group; mu_logp marks the step that sampled the row."""
    rewards = [1.0, 0.0] * len(prompts)
    batch = group_batch(rewards, [g for g in range(len(prompts)) for _ in range(G)])
    batch.scores, batch.prompts = batch.rewards.clone(), [p for p in prompts for _ in range(G)]
    batch.completions = [f"{p}:{n_step}:{i}" for p in prompts for i in range(G)]
    batch.mu_logp = torch.full(batch.mask.shape, -float(n_step + 1), dtype=torch.float64) * batch.mask
    return batch


def run(n_step: int, state, total=100, **kw):
    prompts = (f"p{n_step}a", f"p{n_step}b")
    ctx = step_context(step=n_step, total_steps=total, group_size=G, state=state,
                       examples=[Example(p, "1", "1") for p in prompts])
    return remix(fresh(n_step, prompts), ctx, **kw), ctx


def test_whole_groups_of_the_last_k_steps_make_share_p_of_the_batch_with_their_own_mu():
    out, ctx = run(0, {})
    assert out.size == 2 * G and ctx.metrics["remix/offpolicy_frac"] == 0.0  # nothing stored yet
    for s in (1, 2, 3):
        out, ctx = run(s, ctx.state)
        assert out.size == 4 * G and ctx.metrics["remix/offpolicy_frac"] == 0.5   # p = 0.5: as many groups again
        old = out.completions[2 * G:]
        steps = [int(c.split(":")[1]) for c in old]
        assert all(1 <= s - t <= 2 for t in steps)                                 # k = 2: only the last two steps
        for i, t in zip(range(2 * G, 4 * G), steps):                                # each row's own behaviour mu
            assert torch.all(out.mu_logp[i][out.mask[i] > 0] == -(t + 1))
        groups = out.group[2 * G:].tolist()
        assert groups == [2, 2, 3, 3] and len(ctx.examples) == 4                   # new ids, whole groups
        for i, g in zip(range(2 * G, 4 * G), groups):
            assert ctx.examples[g].prompt == out.prompts[i]
        assert ctx.metrics["remix/replay_age"] == pytest.approx(sum(s - t for t in steps) / len(steps))
    assert ctx.metrics["remix/buffer_rows"] == 3 * 2 * G  # steps 1, 2, 3 after step 3 (step 4 draws from 2, 3)


def test_a_replayed_group_gets_the_advantages_it_had_when_sampled():
    _, ctx = run(0, {})
    out, _ = run(1, ctx.state)
    A = grpo(out)[:, 0]
    assert torch.allclose(A[2 * G:], A[:2 * G])  # the same 1, 0 rewards in every group


def test_p_zero_is_the_plain_batch():
    """Catalog test (1), data half: p = 0 adds nothing (with utd = 1, objectives/remix.py gives PPO-clip)."""
    _, ctx = run(0, {}, p=0.0)
    out, ctx = run(1, ctx.state, p=0.0)
    plain = fresh(1, ("p1a", "p1b"))
    assert out.size == plain.size and out.completions == plain.completions
    assert torch.equal(out.group, plain.group) and ctx.metrics["remix/offpolicy_frac"] == 0.0


def test_from_the_reincarnation_step_on_nothing_is_replayed_and_the_buffer_is_emptied():
    _, ctx = run(0, {}, total=4)
    out, ctx = run(1, ctx.state, total=4)
    assert out.size == 4 * G                                  # before s_r = round(0.5 x 4) = 2: mixed
    out, ctx = run(2, ctx.state, total=4)
    assert out.size == 2 * G and ctx.metrics["remix/offpolicy_frac"] == 0.0
    assert len(ctx.state["buffer"]) == 0 and ctx.state["examples"] == {}
    out, ctx = run(3, ctx.state, total=4)
    assert out.size == 2 * G and len(ctx.state["buffer"]) == 0
    _, ctx = run(2, {}, total=4, reincarnate_at=None)          # no reincarnation: stays mixed
    assert len(ctx.state["buffer"]) == 2 * G


def test_the_state_pickles_and_a_resumed_run_draws_the_same_groups():
    state = {}
    for s in range(3):
        _, ctx = run(s, state, p=0.5)
        state = ctx.state
    restored = pickle.loads(pickle.dumps(copy.deepcopy(state)))
    a, _ = run(3, state)
    b, _ = run(3, restored)
    assert a.completions == b.completions and torch.equal(a.group, b.group)


def test_the_share_p_sets_the_number_of_replayed_groups():
    assert [offpolicy_groups(p, 4) for p in (0.0, 0.2, 0.5, 0.75)] == [0, 1, 4, 12]


@pytest.mark.parametrize("kw, match", [
    ({"k": 0}, "max_age must be an integer >= 0|k=0"), ({"p": 1.0}, "p=1.0"), ({"p": -0.1}, "p=-0.1"),
    ({"reincarnate_at": 1.0}, "at=1.0"), ({"capacity": 0}, "capacity must be"),
])
def test_bad_settings_are_refused_naming_the_parameter(kw, match):
    with pytest.raises(ValueError, match=match):
        check_remix(**kw)


def test_a_prompt_drawn_twice_in_a_step_is_stored_as_two_groups():
    ctx = step_context(step=0, total_steps=100, group_size=G, state={}, examples=[Example("q", "1", "1")] * 2)
    remix(fresh(0, ("q", "q")), ctx)
    out, ctx = run(1, ctx.state)
    assert out.size == 4 * G and torch.bincount(out.group).tolist() == [G] * 4
