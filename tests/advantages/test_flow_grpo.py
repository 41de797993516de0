"""Flow-GRPO: the trajectory's outcome on every turn, group statistics over the prompt's turn-samples."""
import pytest
import torch

from tests.helpers import D, batch_with_mask, seeded
from workbench import registry
from workbench.advantages.flow_grpo import flow_grpo
from workbench.advantages.group import grpo
from workbench.recipes import Recipe, use
from workbench.tasks import get_task
from workbench.train.pipeline import Pipeline

pytestmark = pytest.mark.covers("flow-grpo")


def turns_batch(rewards, group, n_turns, tokens=2):
    """Rows of n_turns[i] turns: `tokens` policy tokens then one observation token (mask 0) per turn."""
    B, T = len(rewards), max(n_turns) * (tokens + 1)
    mask, turn = torch.zeros(B, T, dtype=D), torch.full((B, T), -1)
    for i, n in enumerate(n_turns):
        for k in range(n):
            mask[i, k * (tokens + 1):k * (tokens + 1) + tokens] = 1.0
            turn[i, k * (tokens + 1):(k + 1) * (tokens + 1)] = k
    return batch_with_mask(torch.as_tensor(rewards, dtype=D), group, mask, turn=turn)


def random_batch(seed, P=4, G=6, one_turn=False):
    g = seeded(seed)
    n = [1] * (P * G) if one_turn else torch.randint(1, 5, (P * G,), generator=g).tolist()
    return turns_batch(torch.rand(P * G, generator=g, dtype=D).round(), torch.arange(P).repeat_interleave(G), n)


def test_registered_for_multi_turn_tasks_with_the_authors_pooling():
    e = registry.get("advantage", "flow-grpo")
    assert e.needs == ("multi_turn",) and e.reads == ("turn",) and e.defaults["pool"] == "turn"
    pipeline = Pipeline(Recipe(key="r", title="t", summary="s", advantage=[use("flow-grpo")]))
    pipeline.check_task(get_task("calculator"))
    with pytest.raises(ValueError, match="episodes of several turns"):
        pipeline.check_task(get_task("addition"))


@pytest.mark.parametrize("pool", ["turn", "trajectory"])
def test_all_turns_of_a_trajectory_share_one_advantage(pool):
    b = random_batch(0)
    A = flow_grpo(b, pool=pool)
    per_row = A[:, 0]
    assert torch.equal(A, per_row[:, None] * b.mask)


@pytest.mark.parametrize("pool", ["turn", "trajectory"])
@pytest.mark.parametrize("seed", range(3))
def test_one_turn_per_trajectory_is_grpo(pool, seed):
    b = random_batch(seed, one_turn=True)
    torch.testing.assert_close(flow_grpo(b, pool=pool), grpo(b), rtol=0, atol=1e-15)


def test_trajectory_pooling_is_grpo_with_any_turn_counts():
    b = random_batch(4)
    assert torch.equal(flow_grpo(b, pool="trajectory"), grpo(b))


def test_hand_computed_turn_pooling_and_the_nonzero_trajectory_mean():
    # a success in 3 turns and a failure in 1: turn-samples 1, 1, 1, 0 -> mean 3/4, Bessel std 1/2
    b = turns_batch([1.0, 0.0], [0, 0], [3, 1])
    A = flow_grpo(b, pool="turn")[:, 0]
    assert A.tolist() == pytest.approx([0.25 / (0.5 + 1e-6), -0.75 / (0.5 + 1e-6)])
    assert float(A.mean()) != pytest.approx(0.0, abs=1e-3)                       # pool="turn": not zero-mean
    assert float(flow_grpo(b, pool="trajectory")[:, 0].mean()) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_with_unequal_turn_counts_only_trajectory_pooling_is_zero_mean_per_group(seed):
    b = random_batch(seed)
    for pool, zero in (("turn", False), ("trajectory", True)):
        A = flow_grpo(b, pool=pool)[:, 0]
        means = torch.stack([A[b.group == q].mean() for q in b.group.unique()])
        assert bool((means.abs() < 1e-9).all()) == zero


def test_bad_inputs_are_refused():
    b = random_batch(0)
    with pytest.raises(ValueError, match="pool must be one of"):
        flow_grpo(b, pool="step")
    b.mask[3] = 0.0
    with pytest.raises(ValueError, match=r"rows \[3\] have no policy token"):
        flow_grpo(b)
    single = turns_batch([1.0, 0.0, 1.0], [0, 0, 1], [2, 1, 2])
    with pytest.raises(ValueError, match="group of one"):
        flow_grpo(single)
    assert flow_grpo(single, allow_singletons=True)[2].abs().sum() == 0
