import math
from itertools import pairwise

import pytest
import torch

from tests.helpers import TINY, D, DigitSteps, batch_with_mask, grad, random_batch
from workbench import ops, registry
from workbench.batch import RolloutBatch
from workbench.objectives.seeupo import later_turn_correction, turn_plan
from workbench.recipes import RECIPES, Recipe, use
from workbench.train import Trainer, make_config

pytestmark = pytest.mark.covers("seeupo")


def seeupo(*args, **kw):
    return registry.get("objective", "seeupo").fn(*args, **kw)


def episodes():
    """Row 0: turns of 2, 1 and 2 policy tokens with observation tokens between; row 1: turns of 1 and 2 tokens."""
    mask = torch.tensor([[1, 1, 0, 1, 0, 1, 1], [1, 0, 1, 1, 0, 0, 0]], dtype=D)
    turn = torch.tensor([[0, 0, 0, 1, 1, 2, 2], [0, 0, 1, 1, -1, -1, -1]])
    return mask, turn


def moves_only(logp, moves):
    """What the trainer gives the loss at a plan step: gradient through the step's tokens only."""
    return torch.where(moves > 0, logp, logp.detach())


@pytest.mark.parametrize("seed", range(3))
def test_one_turn_episode_is_sequence_level_reinforce_with_grae(seed):
    logp, old, _, mask = random_batch(seed)
    batch = batch_with_mask(torch.rand(6, generator=torch.Generator().manual_seed(seed), dtype=D), [0, 0, 0, 1, 1, 1],
                            mask)
    A = registry.get("advantage", "seeupo").fn(batch)  # GRAE: R - mean_g R
    turn = torch.zeros(mask.shape, dtype=torch.long)
    ours, _ = seeupo(logp, old, A, mask, turn=turn)
    gspo, _ = registry.get("objective", "gspo").fn(logp, old, A, mask, eps_low=0.2, eps_high=0.2)
    assert torch.allclose(ours, gspo) and torch.allclose(grad(ours, logp), grad(gspo, logp))
    at_old = old.clone().requires_grad_(True)  # theta = theta_old: REINFORCE on the length-normalized log-prob
    reinforce = -(A[:, :1] * ops.masked_mean(at_old, mask, -1)[:, None]).mean()
    first, _ = seeupo(at_old, old, A, mask, turn=turn)
    assert torch.allclose(grad(first, at_old), grad(reinforce, at_old))


def test_correction_is_one_until_a_later_turn_moves():
    log_s = torch.tensor([[0.3, 0.0, 0.0]], dtype=D)  # only turn 0 moved
    assert torch.equal(later_turn_correction(log_s), torch.ones(1, 3, dtype=D))
    log_s = torch.tensor([[0.1, 0.2, 0.3]], dtype=D)
    expected = torch.tensor([[math.exp(0.5), math.exp(0.3), 1.0]], dtype=D)
    assert torch.allclose(later_turn_correction(log_s), expected)
    assert torch.equal(later_turn_correction(log_s, correction="none"), torch.ones(1, 3, dtype=D))


def test_code_correction_clips_each_factor_and_the_running_product():
    log_s = torch.tensor([[0.1, 0.3, -0.2, 0.25]], dtype=D)
    m2 = 1.2                                    # e^0.25 clipped to 1.2
    m1 = min(max(m2 * math.exp(-0.2), 0.8), 1.2)  # 0.9826
    m0 = min(max(m1 * 1.2, 0.8), 1.2)           # e^0.3 clipped to 1.2, then the product: 1.179
    got = later_turn_correction(log_s, correction="code")
    assert torch.allclose(got, torch.tensor([[m0, m1, m2, 1.0]], dtype=D))


def test_a_later_turns_movement_scales_the_earlier_turns_gradient():
    mask, turn = episodes()
    old = torch.full(mask.shape, -1.0, dtype=D)
    A = torch.tensor([[1.0], [-1.0]], dtype=D) * mask
    moved = old.clone()
    moved[0, 5:7] += torch.tensor([0.05, 0.15], dtype=D)  # turn 2 of row 0: s_2 = e^0.1, within the clip
    logp = moved.clone().requires_grad_(True)
    turn1 = torch.zeros_like(mask)
    turn1[0, 3] = 1.0
    with_m, metrics = seeupo(moves_only(logp, turn1), old, A, mask, turn=turn)
    without, _ = seeupo(moves_only(logp, turn1), old, A, mask, turn=turn, correction="none")
    g_with, g_without = grad(with_m, logp), grad(without, logp)
    assert g_with[0, 3].item() == pytest.approx(math.exp(0.1) * g_without[0, 3].item())
    assert torch.count_nonzero(g_with) == 1  # the step moves turn 1 of row 0 only
    assert metrics["seeupo/correction_max"] == pytest.approx(math.exp(0.1))


def test_the_plan_lists_turns_last_first():
    mask, turn = episodes()
    batch = batch_with_mask([1.0, 0.0], [0, 0], mask, turn=turn)
    plan = turn_plan(batch)
    assert len(plan) == 3
    for k, m in zip((2, 1, 0), plan):
        assert torch.equal(m, ((turn == k) & (mask > 0)).to(D))
    assert [m.tolist() for m in turn_plan(batch, order="forward")] == [m.tolist() for m in reversed(plan)]
    assert [m.tolist() for m in turn_plan(batch, order="simultaneous")] == [mask.tolist()]
    padded = turn_plan(batch, turns=4)
    assert len(padded) == 4 and padded[0].sum() == 0
    with pytest.raises(ValueError, match="raise turns"):
        turn_plan(batch, turns=2)


def test_turn_samples_are_averaged_per_turn_then_summed_over_turns():
    mask, turn = episodes()
    A = torch.tensor([[1.0, 3.0, 0.0, 4.0, 0.0, 2.0, 2.0], [5.0, 0.0, 1.0, 3.0, 0.0, 0.0, 0.0]], dtype=D)
    logp = torch.full(mask.shape, -1.0, dtype=D)
    loss, _ = seeupo(logp, logp, A, mask, turn=turn)  # ratio 1, M = 1: l_t = -A_t
    row0, row1 = (1 + 3) / 2 + 4 + 2, 5 + (1 + 3) / 2
    assert loss.item() == pytest.approx(-(row0 + row1) / 2)


def test_refuses_another_aggregation():
    logp, old, A, mask = random_batch(0)
    with pytest.raises(ValueError, match="seq-mean-token-mean"):
        seeupo(logp, old, A, mask, agg="token-mean")


# --------------------------------------------------------------------- a two-turn tabular game (softmax tables)

def play(R, order, correction, iters, lr=5.0, epochs=4, start=0.4):
    """Two one-token turns, two actions each, expected (exact) losses; turn 2's table does not see turn 1's action
    (two agents acting in sequence, SeeUPO's multi-agent bandit). R[a, b]: payoff. Starts miscoordinated: turn 1
    leans to action 0, turn 2 to action 1. Returns the expected return J before each batch."""
    th1 = torch.tensor([start, 0.0], dtype=D, requires_grad=True)
    th2 = torch.tensor([0.0, start], dtype=D, requires_grad=True)
    a, b = torch.tensor([0, 0, 1, 1]), torch.tensor([0, 1, 0, 1])
    mask, turn = torch.ones(4, 2, dtype=D), torch.tensor([[0, 1]]).repeat(4, 1)
    batch = RolloutBatch(response_ids=torch.zeros(4, 2, dtype=torch.long), mask=mask, group=torch.zeros(4).long(),
                         turn=turn)
    optimizer = torch.optim.SGD([th1, th2], lr=lr)

    def logp():
        return torch.stack([torch.log_softmax(th1, 0)[a], torch.log_softmax(th2, 0)[b]], 1)

    returns = []
    for _ in range(iters):
        with torch.no_grad():
            old = logp()
            p = old.sum(1).exp()                    # pi_old(a, b): every pair weighted by its probability
            J = float((p * R[a, b]).sum())
        returns.append(J)
        A = (R[a, b] - J)[:, None].expand(4, 2)     # GRAE in the infinite-group limit
        denom = ops.Denominators(num_seqs=1.0, weights=p[:, None].expand(4, 2))
        for _ in range(epochs):
            for moves in turn_plan(batch, order=order):
                loss, _ = seeupo(moves_only(logp(), moves), old, A, mask, turn=turn, denom=denom,
                                 correction=correction)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
    return returns


def test_tabular_coordination_reverse_with_correction_improves_monotonically():
    """What we found (2 x 2 coordination game R = I, optimum 1): the reverse-sequential update with the correction
    M raises J at every batch and coordinates; the simultaneous update first lowers J, then also coordinates; the
    sequential update without the correction (M = 1) oscillates: the two turns keep swapping their preferences and
    never coordinate. With a turn-2 table that sees turn 1 (or from random starts) all of them converge alike."""
    R = torch.eye(2, dtype=D)
    reverse = play(R, "reverse", "is", iters=14)
    assert all(later >= earlier for earlier, later in pairwise(reverse))
    assert reverse[-1] > 0.98
    simultaneous = play(R, "simultaneous", "is", iters=14)
    assert simultaneous[1] < simultaneous[0] - 0.01 and simultaneous[-1] > 0.95
    uncorrected = play(R, "reverse", "none", iters=14)
    assert max(uncorrected) < 0.55


# --------------------------------------------------------------------- the trainer runs the plan

def test_the_trainer_takes_one_optimizer_step_per_turn(tmp_path, monkeypatch):
    recipe = Recipe(key="probe", title="t", summary="s", advantage=[use("seeupo")], objective=use("seeupo"),
                    agg="seq-mean-token-mean")
    monkeypatch.setitem(RECIPES, "probe", recipe)
    config = make_config("smoke", recipe="probe", **{**TINY, "task": "gridworld", "minibatches": 1, "steps": 1})
    trainer = Trainer(config, tmp_path, progress=False)
    trainer.task = DigitSteps()  # three one-token turns
    trainer.setup()
    assert not trainer.on_policy  # several optimizer steps per batch: old_logp comes from its own forward pass
    steps = []
    step = trainer.optimizer.step
    monkeypatch.setattr(trainer.optimizer, "step", lambda *a, **k: steps.append(1) or step(*a, **k))
    batch = trainer.make_batch(0)
    turns = int(batch.turn.max()) + 1
    trainer.train_on(batch, 0)
    assert turns == 3 and len(steps) == 3
