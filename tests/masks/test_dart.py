"""DART's entropy filter: exactly k = floor(0.5 N) trajectories kept, every kept one of higher mean entropy than every
dropped one, over the valid tokens only; and its refusals."""
import pytest
import torch

from tests.helpers import batch_with_mask, seeded
from workbench import registry
from workbench.masks.dart import check_entropy_filter, dart_entropy_filter, top_rows, trajectory_entropy

pytestmark = pytest.mark.covers("dart")


@pytest.mark.parametrize("frac, B", [(0.5, 10), (0.5, 7), (0.3, 9), (1.0, 5)])
@pytest.mark.parametrize("seed", range(3))
def test_keeps_exactly_k_rows_and_min_kept_at_least_max_dropped(seed, frac, B):
    """Catalog test (2)."""
    g = seeded(seed)
    mask = (torch.rand(B, 6, generator=g) < 0.8).double()
    mask[:, 0] = 1.0
    entropy = torch.rand(B, 6, generator=g, dtype=torch.float64) * 3
    batch = batch_with_mask([0.0] * B, list(range(B)), mask, entropy=entropy)
    out = dart_entropy_filter(batch, entropy_filter=frac)
    kept = out.sum(-1) > 0
    k = int(frac * B)
    assert int(kept.sum()) == k
    h = trajectory_entropy(entropy, mask)
    if k < B:
        assert float(h[kept].min()) >= float(h[~kept].max())
    assert torch.equal(out[kept], mask[kept])  # a kept row keeps its whole mask


def test_the_mean_is_over_valid_tokens_only():
    """Row 0: a high-entropy padding position must not count (its valid tokens are low)."""
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]], dtype=torch.float64)
    entropy = torch.tensor([[0.1, 0.1, 9.0], [0.5, 0.5, 0.5]], dtype=torch.float64)
    assert trajectory_entropy(entropy, mask).tolist() == pytest.approx([0.1, 0.5])
    out = dart_entropy_filter(batch_with_mask([0.0, 0.0], [0, 1], mask, entropy=entropy), entropy_filter=0.5)
    assert out.sum(-1).tolist() == [0.0, 3.0]


def test_fewer_rows_than_one_kept_filters_nothing():
    """k = int(0.5 x 1) = 0: the reference skips the filter."""
    assert top_rows(torch.tensor([0.3]), 0.5).tolist() == [True]


@pytest.mark.parametrize("bad", [0.0, -0.1, 1.5, True, "half"])
def test_bad_fractions_are_refused_naming_the_parameter(bad):
    with pytest.raises(ValueError, match="entropy_filter="):
        check_entropy_filter(entropy_filter=bad)


def test_registered_reading_the_old_policys_entropy():
    entry = registry.get("token_mask", "dart")
    assert entry.reads == ("entropy",) and entry.defaults == {"entropy_filter": 0.5}
    assert entry.declares("filtered_frac/dart")
