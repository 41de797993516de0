"""AEPO-arbitrary's advantage override: re-sampled rows get exactly 1, the others keep the chain's advantage."""
import pytest
import torch

from tests.helpers import D, anchor_mask, batch_with_mask, seeded
from workbench import registry
from workbench.advantages.aepo import aepo_override
from workbench.advantages.group import grpo

pytestmark = pytest.mark.covers("aepo-arbitrary")


def case(seed, resampled, G=4, groups=3, T=6):
    g = seeded(seed)
    B = G * groups
    mask = anchor_mask(B, T, g)
    rewards = torch.randint(0, 2, (B,), generator=g).to(D)
    batch = batch_with_mask(rewards, torch.arange(groups).repeat_interleave(G), mask)
    batch.advantages = grpo(batch, allow_singletons=True)
    batch.resampled = torch.as_tensor(resampled, dtype=torch.bool)
    return batch


def test_registered_after_grpo_reading_the_marked_rows():
    entry = registry.get("advantage", "aepo-arbitrary")
    assert set(entry.reads) == {"advantages", "resampled"} and entry.defaults == {}
    assert entry.title == registry.catalog()["aepo-arbitrary"]["title"] and entry.equation and entry.fn.__doc__


@pytest.mark.parametrize("seed", range(4))
def test_marked_rows_get_exactly_one_on_their_tokens_and_the_rest_is_unchanged(seed):
    marked = torch.rand(12, generator=seeded(100 + seed)) < 0.4
    batch = case(seed, marked)
    out = aepo_override(batch)
    assert torch.all(out[marked][batch.mask[marked] > 0] == 1.0)
    assert torch.all(out[batch.mask == 0] == 0)
    assert torch.equal(out[~marked], batch.advantages[~marked])


def test_no_marked_row_is_grpo():
    batch = case(7, [False] * 12)
    assert torch.equal(aepo_override(batch), grpo(batch))


def test_missing_or_misshapen_marks_are_clear_errors():
    batch = case(8, [False] * 12)
    batch.resampled = None
    with pytest.raises(ValueError, match=r"needs batch fields \['resampled'\]"):
        aepo_override(batch)
    batch.resampled = torch.zeros(12, 2, dtype=torch.bool)
    with pytest.raises(ValueError, match=r"resampled must be a \[B\] = \[12\] bool mask"):
        aepo_override(batch)
