import pytest
import torch

from workbench import ops, registry
from workbench.objectives.multiturn import action_mean

pytestmark = pytest.mark.covers("m-grpo")


def trajectory():
    """Two trajectories: row 0 = action(2 tokens) obs(2) action(1); row 1 = one action of 3 tokens."""
    mask = torch.tensor([[1, 1, 0, 0, 1], [1, 1, 1, 0, 0]], dtype=torch.float64)
    turn = torch.tensor([[0, 0, 0, 0, 1], [0, 0, 0, 0, 0]])
    return mask, turn


def test_action_mean_weights_actions_then_trajectories():
    mask, turn = trajectory()
    loss = torch.tensor([[1.0, 3.0, 100.0, 100.0, 6.0], [3.0, 3.0, 3.0, 0.0, 0.0]], dtype=torch.float64)
    # row 0: actions (1+3)/2 = 2 and 6 -> 4; row 1: 3 -> mean 3.5
    assert action_mean(loss, mask, turn).item() == pytest.approx(3.5)


def test_observation_tokens_get_zero_gradient_and_actions_share_the_advantage():
    mask, turn = trajectory()
    logp = torch.full(mask.shape, -1.0, dtype=torch.float64, requires_grad=True)
    A = torch.tensor([[1.0], [-1.0]], dtype=torch.float64).expand_as(mask) * mask
    loss, _ = registry.get("objective", "m-grpo").fn(logp, logp.detach(), A, mask, turn=turn)
    (g,) = torch.autograd.grad(loss, logp)
    assert torch.all(g[mask == 0] == 0)
    # row 0: first action's tokens weigh 1/2 * 1/2 * 1/2, the one-token action 1/2 * 1/2
    assert torch.allclose(g[0, [0, 1, 4]], -torch.tensor([1 / 8, 1 / 8, 1 / 4], dtype=torch.float64))


def test_one_action_per_trajectory_is_grpo_seq_mean_token_mean():
    g = torch.Generator().manual_seed(0)
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1]], dtype=torch.float64)
    logp = (torch.randn(3, 4, generator=g, dtype=torch.float64) * 0.2 - 1).requires_grad_(True)
    old = logp.detach() + 0.1 * torch.randn(3, 4, generator=g, dtype=torch.float64)
    A = torch.randn(3, 1, generator=g, dtype=torch.float64).expand(3, 4) * mask
    ours, _ = registry.get("objective", "m-grpo").fn(logp, old, A, mask, turn=torch.zeros(3, 4, dtype=torch.long))
    ref, _ = registry.get("objective", "ppo-clip").fn(logp, old, A, mask, agg="seq-mean-token-mean")
    assert torch.allclose(ours, ref)
    assert torch.allclose(torch.autograd.grad(ours, logp)[0], torch.autograd.grad(ref, logp)[0])
    no_turn, _ = registry.get("objective", "m-grpo").fn(logp, old, A, mask)
    assert torch.allclose(no_turn, ref)


def test_global_denominators_make_it_micro_batch_invariant():
    mask, turn = trajectory()
    loss = torch.rand(mask.shape, dtype=torch.float64)
    denom = ops.Denominators.of(mask)
    split = action_mean(loss[:1], mask[:1], turn[:1], denom) + action_mean(loss[1:], mask[1:], turn[1:], denom)
    assert torch.allclose(action_mean(loss, mask, turn, denom), split)
