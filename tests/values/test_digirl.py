"""DigiRL's critic loss: binary cross-entropy of the success logit against [Monte Carlo return > 0]."""
import pytest
import torch
import torch.nn.functional as F

from tests.advantages.step_batches import D, episode_batch
from workbench.advantages.digirl import digirl_targets
from workbench.values.digirl import digirl_value

pytestmark = pytest.mark.covers("digirl")

ACTIONS = [[2, 1, 3], [1, 2], [2, 2, 1, 1]]


def test_value_loss_is_the_codes_two_class_cross_entropy_with_the_gradient_of_a_classifier():
    b = episode_batch(ACTIONS, [[0.0, 0.0, 1.0], [0.0, 0.0], [0.0, 1.0, 0.0, 0.0]], seed=2)
    b.returns, b.value_mask = digirl_targets(b)
    logits = b.values.clone().requires_grad_(True)
    loss, metrics = digirl_value(logits, b, agg="token-mean")
    m = b.value_mask > 0
    z, y = logits[m], (b.returns[m] > 0).long()
    ce = F.cross_entropy(torch.stack([torch.zeros_like(z), z], -1), y)  # the code: two logits, CrossEntropyLoss
    assert loss.item() == pytest.approx(ce.item())
    (grad,) = torch.autograd.grad(loss, logits)
    assert torch.allclose(grad[m], (torch.sigmoid(z) - y.to(D)).detach() / m.sum())
    assert bool((grad[~m] == 0).all())
    assert metrics["value/acc"] == pytest.approx(float(((z > 0).long() == y).double().mean()))
    assert set(metrics) == {"value/loss", "value/acc", "value/mean"}


def test_a_minibatch_without_value_tokens_gives_zero_without_metrics():
    b = episode_batch(ACTIONS, [[0.0, 0.0, 1.0], [0.0, 0.0], [0.0, 1.0, 0.0, 0.0]])
    b.returns, b.value_mask = digirl_targets(b)
    b.value_mask = torch.zeros_like(b.value_mask)
    loss, metrics = digirl_value(b.values.clone().requires_grad_(True), b)
    assert loss.item() == 0 and metrics == {}
