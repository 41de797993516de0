"""VSPO's value-based resampling: zero-variance groups replaced by the candidates of highest task value."""
import copy
import io

import pytest
import torch

from tests.helpers import group_batch
from workbench import registry
from workbench.advantages.baselines import degenerate_groups
from workbench.context import StepContext
from workbench.transforms.vspo import PassRates, vspo_resample

G = 4


def groups_batch(pass_counts, tag):
    """One group of G samples per entry, `k` of them correct (reward = score = 1); prompts '<tag><index>'."""
    rewards = [float(i < k) for k in pass_counts for i in range(G)]
    group = [g for g in range(len(pass_counts)) for _ in range(G)]
    b = group_batch(rewards, group)
    b.scores = b.rewards.clone()
    b.prompts = [f"{tag}{g}" for g in group]
    return b


class Rounds:
    """ctx.resample: round r returns groups_batch(plan[r - 1], f"r{r}-") and records the call."""

    def __init__(self, plan):
        self.plan, self.calls = plan, []

    def __call__(self, r):
        self.calls.append(r)
        return groups_batch(self.plan[r - 1], f"r{r}-")


def context(state, plan=(), step=0, n=4):
    return StepContext(step=step, total_steps=10, seed=0, group_size=G, prompts_per_step=n, max_new_tokens=4,
                       state=state, resample=Rounds(list(plan)))


def zero_var_groups(batch):
    return int(torch.unique(batch.group[degenerate_groups(batch.rewards, batch.group)]).numel())


@pytest.mark.covers("vspo")
def test_vspo_transform_registered_with_state_and_task_value():
    e = registry.get("group_transform", "vspo")
    assert e.state is PassRates and e.provides == ("task_value",)
    assert e.defaults == {"max_rounds": 3, "oversample": 2.0, "decay": 0.5, "max_prompts": 4096}
    assert e.confidence == "abstract-only" and "Our reading" in e.fn.__doc__


@pytest.mark.covers("vspo")
def test_zero_variance_groups_are_replaced_by_the_highest_value_candidates():
    batch = groups_batch([0, 2, 4, 1], "x")  # groups 0 (never) and 2 (always) have zero variance
    ctx = context(PassRates(), plan=[[1, 0, 2], [3, 4, 2]])  # informative: p = 1/4, 1/2 | 3/4, 1/2
    out = vspo_resample(batch, ctx)
    assert ctx.resample.calls == [1, 2]  # round 1 gives 2 candidates < oversample * 2 = 4, round 2 the rest
    assert zero_var_groups(out) == 0 and out.size == batch.size
    assert torch.equal(torch.unique(out.group), torch.arange(4))
    # kept: x1 (p = 1/2), x3 (p = 1/4); added: the two p = 1/2 candidates (v = 1/4), first sampled first
    assert list(dict.fromkeys(out.prompts)) == ["x1", "x3", "r1-2", "r2-2"]
    v = {"x1": 0.25, "x3": 0.1875, "r1-2": 0.25, "r2-2": 0.25}
    assert out.task_value.tolist() == [v[p] for p in out.prompts]
    assert ctx.metrics == {"sampling/rounds": 3, "vspo/zero_var_groups": 2.0, "vspo/replaced_groups": 2.0,
                           "vspo/task_value_mean": pytest.approx(sum(v.values()) / 4)}


@pytest.mark.covers("vspo")
def test_without_enough_candidates_the_rest_stay_and_resampling_stops_at_max_rounds():
    batch = groups_batch([0, 4, 0, 2], "x")
    ctx = context(PassRates(), plan=[[4, 0, 1, 0], [0, 0, 0, 0]])  # a single informative candidate
    out = vspo_resample(batch, ctx, max_rounds=3)
    assert ctx.resample.calls == [1, 2] and ctx.metrics["vspo/replaced_groups"] == 1
    assert zero_var_groups(out) == 2 and out.size == batch.size
    assert list(dict.fromkeys(out.prompts)) == ["x1", "x2", "x3", "r1-2"]  # the first zero-variance group replaced


@pytest.mark.covers("vspo")
def test_max_rounds_one_turns_resampling_off_and_keeps_the_batch():
    batch = groups_batch([0, 2, 4, 1], "x")
    ctx = context(PassRates(), plan=[[1, 2, 3, 1]])
    out = vspo_resample(batch, ctx, max_rounds=1)
    assert ctx.resample.calls == []
    assert out.prompts == batch.prompts and torch.equal(out.rewards, batch.rewards)
    assert torch.equal(out.group, batch.group) and torch.equal(out.response_ids, batch.response_ids)
    assert out.task_value.tolist() == [v for v in (0.0, 0.25, 0.0, 0.1875) for _ in range(G)]


@pytest.mark.covers("vspo")
def test_pass_rates_are_smoothed_across_steps_and_evicted_least_recent_first():
    state = PassRates()
    vspo_resample(groups_batch([4, 2], "x"), context(state, step=0), max_rounds=1)
    assert state.rate == {"x0": 1.0, "x1": 0.5}
    out = vspo_resample(groups_batch([2, 0], "x"), context(state, step=1), max_rounds=1, decay=0.5)
    assert state.rate == {"x0": 0.75, "x1": 0.25}  # 0.5 old + 0.5 new
    assert out.task_value.tolist() == [0.1875] * (2 * G)  # v of the smoothed rates 0.75 and 0.25
    vspo_resample(groups_batch([1], "y"), context(state, step=2), max_rounds=1, max_prompts=2)
    assert set(state.rate) == {"x1", "y0"} and state.seen == {"x1": 1, "y0": 2}


@pytest.mark.covers("vspo")
def test_state_round_trips_through_a_checkpoint():
    """A restored copy of the state makes the same choices and ends in the same state."""
    state = PassRates()
    vspo_resample(groups_batch([3, 1, 2], "r2-"), context(state, step=0), max_rounds=1)  # history on round-2 prompts
    buffer = io.BytesIO()
    torch.save({"group_transform:vspo": copy.deepcopy(state)}, buffer)
    buffer.seek(0)
    restored = torch.load(buffer, weights_only=False)["group_transform:vspo"]
    assert restored == state
    plan = [[1, 0], [1, 2, 3]]
    outs = [vspo_resample(groups_batch([0, 4], "x"), context(s, plan=plan, step=1)) for s in (state, restored)]
    assert outs[0].prompts == outs[1].prompts and torch.equal(outs[0].task_value, outs[1].task_value)
    assert restored == state
    # the history counts: r2-0 (pass rate 3/4, then 1/4: smoothed 1/2) ranks first; a fresh state picks others
    assert list(dict.fromkeys(outs[0].prompts)) == ["r2-0", "r2-1"]
    fresh = vspo_resample(groups_batch([0, 4], "x"), context(PassRates(), plan=plan, step=1))
    assert list(dict.fromkeys(fresh.prompts)) == ["r2-1", "r1-0"]


@pytest.mark.covers("vspo")
@pytest.mark.parametrize("kw, match", [({"max_rounds": 0}, "max_rounds must be an int >= 1"),
                                       ({"oversample": 0.5}, "oversample must be >= 1"),
                                       ({"decay": 1.0}, r"decay must be in \[0, 1\)"),
                                       ({"max_prompts": 0}, "max_prompts must be an int >= 1")])
def test_bad_parameters_are_refused_by_name(kw, match):
    with pytest.raises(ValueError, match=match):
        vspo_resample(groups_batch([0, 2], "x"), context(PassRates()), **kw)


@pytest.mark.covers("vspo")
def test_rows_without_prompt_text_are_refused():
    b = groups_batch([0, 2], "x")
    b.prompts = []
    with pytest.raises(ValueError, match="batch.prompts has 0 entries"):
        vspo_resample(b, context(PassRates()))


@pytest.mark.covers("vspo")
def test_under_data_parallelism_every_rank_adds_every_ranks_groups_and_samples_the_same_rounds():
    """Rank 0's view of a two-rank step: `gather_objects` adds rank 1's (prompt, pass rate) pairs after its own, and
    `gather` sums the counts that decide the rounds: rank 0 has no zero-variance group but rank 1 has one, so rank 0
    samples the extra round too (a collective every rank must join) and keeps nothing from it."""
    other = [("z0", 0.0)]  # rank 1's group: all wrong
    state, ctx = PassRates(), context(PassRates(), plan=[[2, 3]])
    ctx.state = state
    ctx.gather_objects = lambda items: list(items) + other
    ctx.gather = lambda x: torch.cat([x, torch.ones_like(x)])  # rank 1 needs one replacement, has no candidate
    out = vspo_resample(groups_batch([2, 1], "x"), ctx, max_rounds=2)
    assert ctx.resample.calls == [1] and out.prompts == groups_batch([2, 1], "x").prompts  # nothing to replace here
    assert state.rate == {"x0": 0.5, "x1": 0.25, "z0": 0.0, "r1-0": 0.5, "r1-1": 0.75}  # own first, then rank 1's
