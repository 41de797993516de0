"""SPEAR's replay loss weight: c_SIL on the replayed rows, 1 on the step's own; the weighted loss is the fresh loss
plus c_SIL times the replay loss (same denominators)."""
import pytest
import torch

from tests.helpers import make_batch
from workbench import ops, registry
from workbench.weights.spear import check_spear_weight, spear_weight

pytestmark = pytest.mark.covers("spear")


def batch_with_replay():
    batch = make_batch([1.0, 0.0, 1.0, 1.0], [0, 0, 1, 1], lengths=[2, 3, 1, 3])
    batch.offpolicy_mask = batch.mask.clone()
    batch.offpolicy_mask[:2] = 0  # rows 2 and 3 were replayed
    return batch


def test_replayed_rows_weigh_the_coefficient_fresh_rows_one():
    w, metrics = spear_weight(batch_with_replay(), coef=0.3)
    assert torch.equal(w[:, 0], torch.tensor([1.0, 1.0, 0.3, 0.3], dtype=w.dtype)) and w.shape == (4, 3)
    assert metrics == {"spear/sil_coef": 0.3, "spear/replayed_share": 0.5}


def test_the_weighted_loss_is_fresh_plus_c_times_replay():
    batch = batch_with_replay()
    per_token = torch.randn(batch.mask.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    w, _ = spear_weight(batch, coef=0.3)
    denom = ops.Denominators.of(batch.mask, norm_constant=12.0)
    total = ops.aggregate(per_token, batch.mask, "seq-mean-token-sum-norm", ops.Denominators(**{
        **denom.__dict__, "weights": w}))
    fresh, replay = batch.mask.clone(), batch.mask.clone()
    fresh[2:], replay[:2] = 0, 0
    expected = (ops.aggregate(per_token, fresh, "seq-mean-token-sum-norm", denom)
                + 0.3 * ops.aggregate(per_token, replay, "seq-mean-token-sum-norm", denom))
    torch.testing.assert_close(total, expected)


def test_coefficient_zero_leaves_the_fresh_loss_and_no_replay_means_weight_one():
    batch = batch_with_replay()
    batch.offpolicy_mask = None
    w, m = spear_weight(batch, coef=0.0)
    assert torch.equal(w, torch.ones_like(w)) and m["spear/replayed_share"] == 0.0


def test_registration_and_bad_settings():
    entry = registry.get("loss_weight", "spear")
    assert entry.defaults == {"coef": 1.0} and entry.reads == ("offpolicy_mask",)
    for bad in (-0.1, float("inf"), "1"):
        with pytest.raises(ValueError, match="weighs the replayed rows' loss"):
            check_spear_weight(coef=bad)
