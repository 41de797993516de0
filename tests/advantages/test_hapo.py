"""HAPO's token-level group average: length-weighted statistics, the GRPO fallback, and the padding quirk."""
import pytest
import torch

from tests.helpers import D, make_batch
from workbench import registry
from workbench.advantages.group import grpo
from workbench.advantages.hapo import hapo, token_level_stats

pytestmark = pytest.mark.covers("hapo")


def test_registered_with_the_codes_defaults():
    entry = registry.get("advantage", "hapo")
    assert entry.defaults == {"eps": 1e-6, "fallback": 5.0, "allow_singletons": False, "reference_bug": False}
    assert entry.title == registry.catalog()["hapo"]["title"] and entry.equation and entry.fn.__doc__


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_equal_lengths_give_grpo_with_the_population_std(seed):
    """Catalog test (2): with |y_i| equal the token statistics are the sequence ones."""
    g = torch.Generator().manual_seed(seed)
    rewards = torch.rand(12, generator=g, dtype=D).tolist()
    batch = make_batch(rewards, [0] * 4 + [1] * 4 + [2] * 4, [5] * 12)
    assert torch.allclose(hapo(batch), grpo(batch, unbiased=False), atol=1e-12, rtol=0)
    assert not torch.allclose(hapo(batch), grpo(batch), atol=1e-3)  # and not the Bessel one


def test_unequal_lengths_weight_the_group_statistics_by_tokens():
    # one group: R = (1, 0) over 3 and 1 tokens: mu = 3/4, sigma = sqrt(3/4 * 1/4) over the 4 tokens
    batch = make_batch([1.0, 0.0], [0, 0], [3, 1])
    mu, sigma = 0.75, (0.75 * 0.25) ** 0.5
    A = hapo(batch)
    assert A[0, :3].tolist() == pytest.approx([(1 - mu) / (sigma + 1e-6)] * 3, abs=1e-12)
    assert A[1, 0].item() == pytest.approx((0 - mu) / (sigma + 1e-6), abs=1e-12)
    assert A[1, 1:].abs().sum() == 0  # 0 off the mask
    mean, std = token_level_stats(batch.rewards.double(), batch.lengths.double(), batch.group)
    assert mean.tolist() == pytest.approx([mu, mu]) and std.tolist() == pytest.approx([sigma, sigma])
    # the token-weighted mean of A over the group's tokens is 0 (sequence-weighted it would not be)
    assert (A * batch.mask).sum().item() == pytest.approx(0.0, abs=1e-9)


def test_a_group_with_an_extreme_token_level_advantage_falls_back_to_grpo():
    # group 0: one short correct answer among long wrong ones, A_0 = sqrt(90) > 5 at token level -> GRPO;
    # group 1: ordinary, stays token-level
    batch = make_batch([1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0], [0] * 4 + [1] * 4, [1, 30, 30, 30, 4, 2, 6, 3])
    A, ref = hapo(batch), grpo(batch)
    mean, std = token_level_stats(batch.rewards.double(), batch.lengths.double(), batch.group)
    assert ((1 - mean[0]) / std[0]).item() > 5
    assert torch.equal(A[:4], ref[:4])
    token_level = ((batch.rewards.double() - mean) / (std + 1e-6))[4:, None] * batch.mask[4:]
    assert torch.allclose(A[4:], token_level, atol=1e-12) and not torch.allclose(A[4:], ref[4:], atol=1e-3)
    # a higher threshold keeps group 0 token-level too
    assert (hapo(batch, fallback=20.0)[0, 0] - ((1 - mean[0]) / (std[0] + 1e-6))).abs() < 1e-12


def test_reference_bug_lets_padding_trigger_the_fallback():
    """The code normalizes R_i * mask: its padding holds (0 - mu)/(sigma + eps) and is checked against 5."""
    # group 0: rewards far from 0 with a small spread, padded (group 1 is longer); group 1 near 0
    batch = make_batch([10.0, 10.5, 10.0, 10.5, 1.0, 0.0, 0.0, 1.0], [0] * 4 + [1] * 4, [3] * 4 + [6] * 4)
    fixed, buggy = hapo(batch), hapo(batch, reference_bug=True)
    token_level = grpo(batch, unbiased=False)  # equal lengths within each group
    assert torch.allclose(fixed, token_level, atol=1e-12)
    assert torch.allclose(buggy[:4], grpo(batch)[:4], atol=1e-12)  # (0 - 10.25) / 0.25 = -41 -> fallback
    assert torch.allclose(buggy[4:], token_level[4:], atol=1e-12)  # group 1 fills the width T: no padding
    assert not torch.allclose(buggy[:4], fixed[:4], atol=1e-3)


def test_singletons_and_bad_parameters_are_refused():
    batch = make_batch([1.0, 0.0, 1.0], [0, 0, 1], [2, 3, 1])
    with pytest.raises(ValueError, match="hapo: a group of one"):
        hapo(batch)
    assert hapo(batch, allow_singletons=True)[2].abs().sum() == 0
    with pytest.raises(ValueError, match="fallback must be > 0"):
        hapo(batch, fallback=0.0, allow_singletons=True)
    with pytest.raises(ValueError, match="eps must be > 0"):
        hapo(batch, eps=0.0, allow_singletons=True)
