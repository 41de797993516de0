"""Multi-reward aggregation: TRL's sum_then_normalize and normalize_then_sum, NaN-aware."""
import math

import pytest
import torch

from workbench.rewards.aggregate import combine, group_normalized, nanstd

NAN = math.nan
D = torch.float64


def test_sum_then_normalize_is_the_weighted_nansum():
    values = torch.tensor([[1.0, 0.5], [0.0, NAN], [1.0, -1.0]], dtype=D)
    rewards, unscorable = combine(values, torch.tensor([1.0, 2.0]), torch.tensor([0, 0, 1]))
    assert rewards.tolist() == [2.0, 0.0, -1.0] and not unscorable.any()


def test_a_row_no_reward_applies_to_is_unscorable_and_nan():
    values = torch.tensor([[NAN, NAN], [1.0, NAN]], dtype=D)
    rewards, unscorable = combine(values, torch.ones(2), torch.tensor([0, 0]))
    assert unscorable.tolist() == [True, False] and math.isnan(rewards[0]) and rewards[1] == 1.0


def test_nanstd_is_bessel_corrected_and_skips_nan():
    x = torch.tensor([1.0, NAN, 3.0, 5.0], dtype=D)
    assert nanstd(x).item() == pytest.approx(torch.tensor([1.0, 3.0, 5.0]).std().item())


def test_normalize_then_sum_ignores_each_rewards_scale_and_offset():
    """Each reward is z-scored within its group before the weighted sum: an affine change a*r + b (a > 0) of one
    reward leaves R unchanged (up to the 1e-4 in the denominator), while the plain sum is dominated by it."""
    g = torch.Generator().manual_seed(0)
    values = torch.rand(8, 2, generator=g, dtype=D)
    group = torch.arange(2).repeat_interleave(4)
    rescaled = values.clone()
    rescaled[:, 1] = 1000 * values[:, 1] - 7
    a, _ = combine(values, torch.ones(2), group, "normalize_then_sum")
    b, _ = combine(rescaled, torch.ones(2), group, "normalize_then_sum")
    assert torch.allclose(a, b, atol=1e-3)
    plain, _ = combine(rescaled, torch.ones(2), group)
    assert torch.corrcoef(torch.stack([plain, rescaled[:, 1]]))[0, 1] > 0.999


def test_group_normalization_centers_every_group_and_zeros_singletons():
    values = torch.tensor([[1.0], [3.0], [NAN], [5.0]], dtype=D)
    out = group_normalized(values, torch.tensor([0, 0, 0, 1]))
    assert out[0].item() == pytest.approx(-1 / (math.sqrt(2) + 1e-4)) and out[1].item() == pytest.approx(-out[0].item())
    assert math.isnan(out[2]) and out[3].item() == 0.0


def test_bad_aggregation_and_shapes_are_refused():
    with pytest.raises(ValueError, match="unknown reward_aggregation 'mean'"):
        combine(torch.zeros(2, 1), torch.ones(1), torch.zeros(2), "mean")
    with pytest.raises(ValueError, match="disagree"):
        combine(torch.zeros(2, 2), torch.ones(3), torch.zeros(2))
