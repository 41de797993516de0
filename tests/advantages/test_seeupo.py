import pytest
import torch

from tests.helpers import batch_with_mask
from workbench import registry
from workbench.advantages.seeupo import batch_standardize

pytestmark = pytest.mark.covers("seeupo")
D = torch.float64


def seeupo(batch, **kw):
    return registry.get("advantage", "seeupo").fn(batch, **kw)


def episodes():
    """Four rows in two groups; rows have 1 to 3 turns separated by observation tokens."""
    mask = torch.tensor([[1, 0, 1, 0, 1], [1, 1, 0, 0, 0], [1, 0, 1, 1, 0], [1, 1, 1, 0, 0]], dtype=D)
    turn = torch.tensor([[0, 0, 1, 1, 2], [0, 0, -1, -1, -1], [0, 0, 1, 1, -1], [0, 0, 0, -1, -1]])
    return batch_with_mask([1.0, 0.0, 0.5, 0.1], [0, 0, 1, 1], mask, turn=turn)


def test_grae_is_the_group_centred_reward_on_every_turn():
    batch = episodes()
    a = seeupo(batch)
    expected = torch.tensor([0.5, -0.5, 0.2, -0.2], dtype=D)[:, None] * batch.mask
    assert torch.allclose(a, expected)
    assert torch.equal(a, registry.get("advantage", "grpo").fn(batch, scale="none"))


def test_special_norm_standardizes_over_the_batch_and_clips():
    batch = episodes()
    grae = torch.tensor([0.5, -0.5, 0.2, -0.2], dtype=D)
    z = (grae - grae.mean()) / grae.std()
    assert torch.allclose(seeupo(batch, special_norm=True), z[:, None] * batch.mask)
    x = torch.tensor([10.0] + [0.0] * 19, dtype=D)  # one outlier: its z-score is above 3
    assert batch_standardize(x).max().item() == 3.0
    assert torch.equal(batch_standardize(torch.full((4,), 2.0, dtype=D)), torch.zeros(4, dtype=D))  # std 0: centred


def test_declares_multi_turn():
    assert registry.get("advantage", "seeupo").needs == ("multi_turn",)
