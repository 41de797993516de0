"""Small builders shared by the tests."""
from __future__ import annotations

import torch

from workbench.batch import RolloutBatch


def make_batch(rewards, group, lengths=None, **fields) -> RolloutBatch:
    """A float64 RolloutBatch with the given rewards/groups over right-padded responses (default 3 tokens)."""
    batch = RolloutBatch.from_rewards(rewards, group, lengths if lengths is not None else [3] * len(rewards))
    for name, value in fields.items():
        setattr(batch, name, value)
    return batch


def random_mask(B, T, generator, min_len=1):
    lengths = torch.randint(min_len, T + 1, (B,), generator=generator)
    return (torch.arange(T)[None, :] < lengths[:, None]).double()
