"""SPEAR's advantage: Dr.GRPO's R - mean_g on the fresh rows (their own groups only), R - baseline_rewards on the
replayed rows; with norm_by_std the fresh rows are GRPO's z-score."""
import pytest
import torch

from tests.helpers import make_batch
from workbench import registry
from workbench.advantages.group import grpo
from workbench.advantages.spear import check_spear_advantage, spear_advantage

pytestmark = pytest.mark.covers("spear")


def mixed():
    """Two fresh groups and two replayed rows (group 2) with baseline b = 0.3."""
    batch = make_batch([1.0, 0.0, 0.0, 0.5, 1.0, 0.8], [0, 0, 1, 1, 2, 2], lengths=[2, 1, 3, 2, 2, 1])
    batch.offpolicy_mask = batch.mask.clone()
    batch.offpolicy_mask[:4] = 0
    batch.baseline_rewards = torch.tensor([0, 0, 0, 0, 0.3, 0.3], dtype=torch.float64)
    return batch


def test_fresh_rows_by_hand_and_replayed_rows_recalibrated():
    A = spear_advantage(mixed())
    expected = torch.tensor([0.5, -0.5, -0.25, 0.25, 0.7, 0.5], dtype=torch.float64)
    torch.testing.assert_close(A[:, 0], expected)
    assert torch.equal(A[:, 1:] != 0, mixed().mask[:, 1:] > 0)  # over each row's response mask


def test_without_replayed_rows_it_is_grpo():
    batch = make_batch([1.0, 0.0, 0.0, 0.5], [0, 0, 1, 1])
    batch.baseline_rewards = torch.zeros(4, dtype=torch.float64)
    torch.testing.assert_close(spear_advantage(batch), grpo(batch, scale="none").double())
    torch.testing.assert_close(spear_advantage(batch, norm_by_std=True), grpo(batch).double())


def test_registration_and_bad_settings():
    entry = registry.get("advantage", "spear")
    assert entry.defaults == {"norm_by_std": False, "allow_singletons": False}
    with pytest.raises(ValueError, match="norm_by_std must be True or False"):
        check_spear_advantage(norm_by_std="group")
    with pytest.raises(ValueError, match=r"baseline_rewards"):
        spear_advantage(make_batch([1.0, 0.0], [0, 0]))


def test_a_fresh_row_alone_in_its_group_is_refused_unless_singletons_are_allowed():
    from tests.helpers import group_batch

    batch = group_batch([1.0, 0.0, 1.0], [0, 0, 1])
    batch.baseline_rewards = torch.zeros(3)
    with pytest.raises(ValueError, match="group of one"):
        spear_advantage(batch)
    A = spear_advantage(batch, allow_singletons=True)
    assert torch.equal(A[2], torch.zeros_like(A[2])) and A[0, 0] > 0 > A[1, 0]  # GRPO's, and 0 for the lone row
