"""Token masks: the high-entropy (forking-token) mask."""
import pytest
import torch

from tests.helpers import random_mask
from workbench import registry
from workbench.batch import RolloutBatch
from workbench.masks import high_entropy_mask


def entropy_batch(seed=0, B=6, T=20):
    g = torch.Generator().manual_seed(seed)
    mask = random_mask(B, T, g, min_len=3)
    entropy = torch.rand(B, T, generator=g, dtype=torch.float64) * 3
    entropy[mask == 0] = 100.0  # padding entropy must never be kept
    b = RolloutBatch(response_ids=torch.zeros(B, T, dtype=torch.long), mask=mask,
                     group=torch.zeros(B, dtype=torch.long), entropy=entropy)
    return b


@pytest.mark.covers("high-entropy-mask")
@pytest.mark.parametrize("rho", [0.05, 0.2, 0.5, 0.9])
def test_high_entropy_kept_fraction_is_rho(rho):
    b = entropy_batch()
    kept = high_entropy_mask(b, top_entropy_quantile=rho)
    n = int(b.mask.sum())
    assert abs(float(kept.sum()) - rho * n) <= 1.0  # no ties in continuous entropies: 1/n rounding only
    assert torch.all(kept <= b.mask)
    # threshold equals torch.quantile (TRL's call) on the valid entropies
    tau = torch.quantile(b.entropy[b.mask > 0], 1 - rho)
    assert torch.equal(kept.bool(), (b.entropy >= tau) & (b.mask > 0))


@pytest.mark.covers("high-entropy-mask")
@pytest.mark.parametrize("rho", [0.1, 0.2, 0.7])
def test_high_entropy_min_kept_at_least_max_dropped(rho):
    b = entropy_batch(seed=3)
    kept = high_entropy_mask(b, top_entropy_quantile=rho).bool()
    dropped = (b.mask > 0) & ~kept
    assert kept.any() and dropped.any()
    assert b.entropy[kept].min() >= b.entropy[dropped].max()


@pytest.mark.covers("high-entropy-mask")
def test_high_entropy_rho_one_is_a_no_op_and_ties_are_kept():
    b = entropy_batch()
    assert torch.equal(high_entropy_mask(b), b.mask)
    b.entropy = None  # rho = 1 does not need entropies (TRL skips the computation)
    assert torch.equal(high_entropy_mask(b, top_entropy_quantile=1.0), b.mask)
    b.entropy = torch.ones_like(b.mask)  # all tied: everything is kept
    assert torch.equal(high_entropy_mask(b, top_entropy_quantile=0.2), b.mask)
    with pytest.raises(ValueError, match="top_entropy_quantile"):
        high_entropy_mask(b, top_entropy_quantile=0.0)
    b.entropy = None
    with pytest.raises(ValueError, match="entropy"):
        high_entropy_mask(b, top_entropy_quantile=0.5)
    assert registry.get("token_mask", "high-entropy-mask").defaults == {"top_entropy_quantile": 1.0}
