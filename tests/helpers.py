"""Small builders shared by the tests."""
from __future__ import annotations

import torch

from workbench.batch import RolloutBatch


def make_batch(rewards, group, lengths=None, T=None, dtype=torch.float64, **fields) -> RolloutBatch:
    """A RolloutBatch with the given rewards/groups and right-padded masks of the given lengths."""
    rewards = torch.as_tensor(rewards, dtype=dtype)
    B = rewards.shape[0]
    lengths = torch.as_tensor(lengths if lengths is not None else [3] * B)
    T = T or int(lengths.max())
    mask = (torch.arange(T)[None, :] < lengths[:, None]).to(dtype)
    return RolloutBatch(response_ids=torch.zeros(B, T, dtype=torch.long), mask=mask,
                        group=torch.as_tensor(group), rewards=rewards, **fields)


def random_mask(B, T, generator, min_len=1):
    lengths = torch.randint(min_len, T + 1, (B,), generator=generator)
    return (torch.arange(T)[None, :] < lengths[:, None]).double()
