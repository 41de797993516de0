"""The entropy bonus."""
import pytest
import torch

from workbench import ops

pytestmark = pytest.mark.covers("token-mean", "seq-mean-token-mean", "seq-mean-token-sum",
                                "seq-mean-token-sum-norm")


@pytest.mark.covers("entropy-bonus")
def test_entropy_bonus_step_moves_a_softmax_towards_uniform():
    from workbench.regularizers.entropy import entropy_bonus

    logits = torch.tensor([[[2.0, 0.0, -1.0]]], dtype=torch.float64, requires_grad=True)
    mask = torch.ones(1, 1, dtype=torch.float64)
    h0 = ops.entropy_from_logits(logits)
    loss = entropy_bonus(ops.entropy_from_logits(logits), mask, coef=0.1)
    loss.backward()
    with torch.no_grad():
        h1 = ops.entropy_from_logits(logits - 1.0 * logits.grad)
    assert h1.item() > h0.item()
    assert entropy_bonus(h0, mask, coef=0.0).item() == 0.0
