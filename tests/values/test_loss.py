"""The clipped value loss."""
import pytest
import torch

from workbench.values import value_loss

pytestmark = pytest.mark.covers("ppo-clip")


@pytest.mark.covers("value-loss")
def test_value_loss_clipping():
    R = torch.zeros(1, 5, dtype=torch.float64)
    old = torch.full((1, 5), 1.0, dtype=torch.float64)
    V = torch.tensor([[0.9, 1.1, 0.5, 1.5, 3.0]], dtype=torch.float64, requires_grad=True)
    mask = torch.ones(1, 5, dtype=torch.float64)
    unclipped, _ = value_loss(V, old, R, mask, clip_eps=None, agg="seq-mean-token-sum")
    assert unclipped.item() == pytest.approx(0.5 * (V ** 2).sum().item())
    clipped, _ = value_loss(V, old, R, mask, clip_eps=0.2, agg="seq-mean-token-sum")
    assert clipped.item() >= unclipped.item() - 1e-12
    (g,) = torch.autograd.grad(clipped, V)
    assert g[0, 2] == 0  # V moved 0.5 below V_old towards R: the clipped branch (larger) is active
    assert torch.allclose(g[0, [0, 1]], V[0, [0, 1]].detach())  # inside the band: plain (V - R)
