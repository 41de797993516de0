"""DAPO's soft overlong punishment."""
import pytest
import torch

from workbench.rewards.length import soft_overlong


@pytest.mark.covers("soft-overlong")
def test_soft_overlong_is_zero_then_linear_then_minus_one():
    lengths = torch.arange(0, 13)
    out = soft_overlong(torch.zeros(13, dtype=torch.float64), lengths, max_len=10, buffer=4)
    assert torch.all(out[:7] == 0)                                 # |y| <= L - C = 6
    assert torch.allclose(out[7:11], -torch.arange(1, 5, dtype=torch.float64) / 4)  # linear, -1 at L
    assert torch.all(out[11:] == -1)                               # beyond L
    with pytest.raises(ValueError, match="buffer"):
        soft_overlong(torch.zeros(1), torch.ones(1), max_len=4, buffer=8)
