"""RL4MLE's duration weighting (arXiv 2509.01684): under an asynchronous queue where an action returns at a rate
proportional to 1 / its duration, the duration-weighted update is the synchronous one; equal durations leave the loss
unweighted; the weights have batch mean 1; the duration proxy our tool environments report (steps per episode)."""
import heapq
import math
import random

import pytest
import torch

from tests.helpers import D, DigitFirst
from workbench import ops, registry
from workbench.batch import RolloutBatch
from workbench.models import build_tiny
from workbench.objectives.ppo import ppo_clip
from workbench.recipes import Recipe, get_recipe, use
from workbench.rollout.offpolicy_guidance import replay
from workbench.tasks import get_task
from workbench.train.pipeline import Pipeline
from workbench.weights.rl4mle_duration import RL4MLE_TITLE, episode_duration, rl4mle_duration

pytestmark = pytest.mark.covers("rl4mle-duration")


def steps(n: int) -> list[dict]:
    """The per-step infos of an episode of n environment steps (what `turns` records)."""
    return [{"state": s, "tool_error": None, "action": "x"} for s in range(n)]


def batch_of(durations, lengths=None, T=4) -> RolloutBatch:
    """One row per duration (in environment steps), right-padded responses of `lengths` tokens (default T)."""
    n = len(durations)
    lengths = torch.tensor(lengths if lengths is not None else [T] * n)
    mask = (torch.arange(T)[None, :] < lengths[:, None]).to(D)
    return RolloutBatch(response_ids=torch.zeros(n, T, dtype=torch.long), mask=mask, group=torch.zeros(n).long(),
                        turn_info=[steps(d) for d in durations])


def row_weights(batch) -> torch.Tensor:
    w, _ = rl4mle_duration(batch)
    assert (w == w[:, :1]).all()  # one weight per row: it multiplies the row's sequence loss
    return w[:, 0]


def test_registered_with_the_cards_reading():
    e = registry.get("loss_weight", "rl4mle-duration")
    assert e.title == RL4MLE_TITLE == registry.catalog()["rl4mle-duration"]["title"]
    assert e.confidence == "abstract-only" and e.defaults == {"duration": "steps"}
    assert e.reads == ("turn_info",) and e.needs == ("multi_turn",)
    assert [u.key for u in get_recipe("rl4mle-duration").loss_weights] == ["rl4mle-duration"]


def async_queue(durations: list[int], start: int, horizon: int, phases: list[int]) -> list[int]:
    """The actions a learner receives, in order, in the window (start, start + horizon]: actor k runs action k back to
    back from time phases[k], each run taking durations[k], so action k arrives at rate 1 / durations[k]."""
    events = [(phases[k] + d, k) for k, d in enumerate(durations)]
    heapq.heapify(events)
    arrived = []
    while events[0][0] <= start + horizon:
        t, k = heapq.heappop(events)
        if t > start:
            arrived.append(k)
        heapq.heappush(events, (t + durations[k], k))
    return arrived


@pytest.mark.parametrize("phases", [[0, 0, 0, 0], [0, 1, 2, 5]])
def test_the_duration_weighted_async_update_is_the_synchronous_one(phases):
    """Card (1): four actors run actions of durations 1, 2, 3, 6 steps, each action with its own gradient g_k. Over a
    window of whole periods (lcm = 6) the queue delivers action k H / dt_k times: the unweighted update leans to the
    fast actions, the duration-weighted one (the component's weights through the loss's weighted aggregation, its
    gradient taken by autograd) is the uniform mean over actions, (1/K) sum_k g_k."""
    durations, horizon = [1, 2, 3, 6], 6 * 5
    arrived = async_queue(durations, 7, horizon, phases)
    assert [arrived.count(k) for k in range(4)] == [horizon // d for d in durations]  # rate proportional to 1 / dt
    g = torch.randn(4, 3, generator=torch.Generator().manual_seed(0), dtype=D)
    theta = torch.zeros(3, dtype=D, requires_grad=True)
    batch = batch_of([durations[k] for k in arrived], T=1)
    per_row = (g[arrived] * theta).sum(-1)[:, None]  # row i's loss g_{k(i)} . theta, one token each
    w, _ = rl4mle_duration(batch)
    for weights, expected in ((w, g.mean(0)), (None, g[arrived].mean(0))):
        loss = ops.aggregate(per_row, batch.mask, "seq-mean-token-mean", ops.Denominators(weights=weights))
        update = torch.autograd.grad(loss, theta, retain_graph=True)[0]
        torch.testing.assert_close(update, expected, rtol=1e-12, atol=1e-12)
    assert not torch.allclose(g[arrived].mean(0), g.mean(0))  # the unweighted queue is biased


def test_in_expectation_over_a_random_queue():
    """Card (1) as an expectation: rows drawn i.i.d. with probability q_k proportional to 1 / dt_k; the weighted mean
    converges to the uniform mean (the batch mean of dt converges to E_q[dt], the harmonic mean)."""
    durations = [1.0, 2.0, 5.0]
    rng = random.Random(0)
    q = [1 / d for d in durations]
    drawn = rng.choices(range(3), weights=q, k=60_000)
    g = torch.tensor([1.0, -2.0, 4.0], dtype=D)
    w = row_weights(batch_of([int(durations[k]) for k in drawn], T=1))
    weighted = float((w * g[drawn]).mean())
    assert weighted == pytest.approx(float(g.mean()), abs=0.03)
    assert float(g[drawn].mean()) == pytest.approx(float(torch.tensor(q, dtype=D) / sum(q) @ g), abs=0.03)


def test_equal_durations_leave_the_loss_unweighted():
    """Card (2): every row as long (3 steps): w = 1 and the weighted objective's loss and gradient are the
    unweighted ones, bit for bit."""
    batch = batch_of([3, 3, 3, 3], lengths=[4, 2, 3, 1])
    w, metrics = rl4mle_duration(batch)
    assert torch.equal(w, torch.ones_like(batch.mask)) and metrics == {"rl4mle/duration_mean": 3.0,
                                                                       "rl4mle/weight_max": 1.0}
    g = torch.Generator().manual_seed(1)
    logp = (-torch.rand(4, 4, generator=g, dtype=D)).requires_grad_(True)
    A = torch.randn(4, 1, generator=g, dtype=D).expand(4, 4) * batch.mask
    for agg in ops.AGG_MODES:
        denom = ops.Denominators.of(batch.mask, norm_constant=16.0)
        plain, _ = ppo_clip(logp, logp.detach() - 0.1, A, batch.mask, agg=agg, denom=denom)
        weighted, _ = ppo_clip(logp, logp.detach() - 0.1, A, batch.mask, agg=agg,
                               denom=ops.Denominators(denom.num_tokens, denom.num_seqs, 16.0, weights=w))
        assert torch.equal(plain, weighted)
        assert torch.equal(*(torch.autograd.grad(x, logp, retain_graph=True)[0] for x in (plain, weighted)))


def test_weights_have_batch_mean_one_over_the_trained_rows():
    """Card (3), with a row the update does not train (mask all 0): it is left out of the mean."""
    rng = random.Random(3)
    durations = [rng.randint(1, 9) for _ in range(12)]
    batch = batch_of(durations, lengths=[0] + [rng.randint(1, 4) for _ in range(11)])
    w = row_weights(batch)
    trained = batch.mask.sum(-1) > 0
    assert float(w[trained].mean()) == pytest.approx(1.0, abs=1e-12)
    dt = torch.tensor(durations, dtype=D)
    assert torch.allclose(w, dt / dt[1:].mean())


def test_the_weight_multiplies_each_sequence_loss():
    """seq-mean-token-mean: the loss is mean_i w_i L_i with L_i the row's token mean."""
    batch = batch_of([1, 2, 5], lengths=[4, 2, 3])
    per_token = torch.randn(3, 4, generator=torch.Generator().manual_seed(2), dtype=D)
    w, _ = rl4mle_duration(batch)
    loss = ops.aggregate(per_token, batch.mask, "seq-mean-token-mean", ops.Denominators(weights=w))
    L = (per_token * batch.mask).sum(-1) / batch.mask.sum(-1)
    assert torch.allclose(loss, (torch.tensor([1.0, 2.0, 5.0], dtype=D) / (8 / 3) * L).mean())


@pytest.mark.parametrize("name, n_steps", [("calculator", 5), ("search", 4)])
def test_our_tool_environments_report_their_steps(name, n_steps):
    """The proxy at our scale: an episode's turn_info holds one dict per environment step, so dt = tool calls +
    the answer (calculator: n_operands - 1 calls + 1 with its 5 operands; search: 3 hops + 1)."""
    task = get_task(name)
    example = task.sample(1, random.Random(0))[0]
    env = task.make_env()
    _, info = env.reset(example, 0)
    _, tokenizer = build_tiny(seed=0)
    episode = replay(tokenizer, env, info, task.expert_actions(example))
    assert episode_duration(episode.info) == n_steps == len(task.expert_actions(example))


def test_declared_costs_are_read_from_the_step_info():
    info = [{"duration": 2.5}, {"duration": 0.5}]
    assert episode_duration(info, "info") == 3.0
    with pytest.raises(ValueError, match=r"duration='info' reads each step's info\['duration'\].* steps \[1\]"):
        episode_duration([{"duration": 1.0}, {"state": 0}], "info")
    with pytest.raises(ValueError, match=r"steps \[0\]"):
        episode_duration([{"duration": math.nan}], "info")


def test_a_one_turn_task_is_refused_at_start():
    """Every one-turn episode takes one step: the weights would all be 1, so the recipe asks for a multi-turn task."""
    with pytest.raises(ValueError, match=r"loss_weight:rl4mle-duration needs episodes of several turns .* task "
                                         r"'digit_first' has none"):
        Pipeline(get_recipe("rl4mle-duration")).check_task(DigitFirst())


def test_an_unknown_proxy_is_refused_when_the_recipe_is_built():
    recipe = Recipe(key="r", title="t", summary="s", advantage=["grpo"],
                    loss_weights=[use("rl4mle-duration", duration="wallclock")])
    with pytest.raises(ValueError, match=r"duration='wallclock' is not one of \['steps', 'info'\]"):
        Pipeline(recipe)
