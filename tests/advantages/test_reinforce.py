"""REINFORCE++: whitened discounted returns."""
import pytest
import torch

from tests.helpers import make_batch
from workbench import ops
from workbench.advantages.reinforce import discounted_returns, reinforce_plus_plus


@pytest.mark.covers("reinforce_plus_plus")
def test_reinforce_plus_plus_whitens_discounted_returns():
    b = make_batch([1.0, 0.0, 2.0], [0, 1, 2], lengths=[3, 2, 4])
    A = reinforce_plus_plus(b, eps=0.0)
    assert ops.masked_mean(A, b.mask).abs() < 1e-12
    assert ops.masked_var(A, b.mask).item() == pytest.approx(1.0)
    assert torch.allclose(A[0, :3], A[0, 0].expand(3))  # gamma = 1, one terminal reward: constant per row
    # Bessel (verl) vs population (OpenRLHF) differ exactly by sqrt(n / (n - 1)).
    n = b.mask.sum()
    ratio = reinforce_plus_plus(b, unbiased=False, eps=0) / reinforce_plus_plus(b, unbiased=True, eps=0)
    assert torch.allclose(ratio[b.mask > 0], torch.sqrt(n / (n - 1)).expand(int(n)))


@pytest.mark.covers("reinforce_plus_plus")
def test_discounted_returns():
    r = torch.tensor([[0.0, 0.0, 1.0]], dtype=torch.float64)
    out = discounted_returns(r, torch.ones_like(r), gamma=0.5)
    assert torch.allclose(out, torch.tensor([[0.25, 0.5, 1.0]], dtype=torch.float64))
