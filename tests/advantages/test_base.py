"""What every registered advantage estimator shares: the uniform `fn(batch, **hp) -> A [B, T]` signature."""
import pytest
import torch

from tests.helpers import critic_batch
from workbench import registry


@pytest.mark.filterwarnings("ignore:gigpo called without anchor")
def test_every_registered_advantage_has_the_uniform_signature():
    b = critic_batch()
    b.rewards = torch.tensor([1.0, 0.0], dtype=torch.float64)
    b.group = torch.tensor([0, 0])
    b.baseline_rewards = torch.tensor([0.5, 0.5], dtype=torch.float64)  # ReMax's greedy-rollout reward
    b.truncated = torch.tensor([False, True])  # T-PPO's unfinished rows
    for entry in registry.entries("advantage"):
        A = entry.fn(b)
        assert A.shape == b.mask.shape and torch.all(A[b.mask == 0] == 0), entry.key
