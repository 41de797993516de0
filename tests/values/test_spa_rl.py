"""SPA-RL's value loss: the progress estimator's MSE of sum_t c_t against the outcome + the step critic's loss."""
import pytest
import torch

from tests.advantages.step_batches import episode_batch
from workbench.advantages.spa_rl import progress_readings, spa_rl_targets
from workbench.advantages.step_critic import turn_spans
from workbench.values.loss import value_loss
from workbench.values.spa_rl import progress_loss, spa_rl_value

pytestmark = pytest.mark.covers("spa-rl")

ACTIONS = [[2, 3, 2], [3, 2], [2, 2, 4, 2]]


def batch(seed=0):
    b = episode_batch(ACTIONS, [[0.0, 0.0, 1.0], [0.0, 0.0], [0.0, 0.0, 0.0, 1.0]], seed=seed)
    b.returns, b.value_mask = spa_rl_targets(b)
    return b


def test_estimator_loss_is_zero_iff_the_readings_sum_to_the_outcome():
    b = batch()
    _, last, valid = turn_spans(b)
    values = b.values.clone()
    loss, _ = progress_loss(values, b)
    assert loss.item() > 0
    # move each row's last reading so the sum hits R exactly: zero loss
    c = progress_readings(values, b)
    n = valid.sum(-1) - 1
    fix = b.rewards - c.sum(-1)
    values[torch.arange(3), last[torch.arange(3), n]] += fix
    loss, predicted = progress_loss(values, b)
    assert loss.item() == pytest.approx(0.0, abs=1e-24) and torch.allclose(predicted, b.rewards)
    values[1, last[1, 0]] += 0.1  # any row off: positive
    assert progress_loss(values, b)[0].item() == pytest.approx(0.01 / 3)


def test_estimator_gradient_reaches_every_turn_end_equally_and_nothing_else():
    b = batch(seed=3)
    values = b.values.clone().requires_grad_(True)
    loss, predicted = progress_loss(values, b)
    (grad,) = torch.autograd.grad(loss, values)
    _, last, valid = turn_spans(b)
    at_ends = torch.zeros_like(b.mask, dtype=torch.bool).scatter(1, last, valid)
    expected = 2 * (predicted.detach() - b.rewards) / 3
    for i in range(3):
        assert torch.allclose(grad[i][at_ends[i]], expected[i].expand(int(at_ends[i].sum())))
    assert bool((grad[~at_ends] == 0).all())


def test_the_value_loss_adds_the_clipped_critic_at_the_turn_starts():
    b = batch(seed=1)
    values = b.values + 0.3
    total, metrics = spa_rl_value(values, b, coef=0.1, progress_coef=1.0, clip_eps=0.2)
    prog, _ = progress_loss(values, b)
    critic, _ = value_loss(values, b.old_values, b.returns, b.value_mask, clip_eps=0.2)
    assert total.item() == pytest.approx((prog + 0.1 * critic).item())
    assert {"value/progress_loss", "value/progress_mean", "value/loss", "value/explained_var"} <= set(metrics)


def test_one_token_turns_only_train_the_estimator():
    b = episode_batch([[1, 1], [1]], [[0.0, 1.0], [0.0]])
    b.returns, b.value_mask = spa_rl_targets(b)
    assert b.value_mask.sum() == 0
    total, metrics = spa_rl_value(b.values, b)
    assert total.item() == pytest.approx(progress_loss(b.values, b)[0].item())
    assert set(metrics) == {"value/progress_loss", "value/progress_mean"}
