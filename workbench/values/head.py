"""The critic's head: V(s_t) from the policy's last hidden state (a shared trunk)."""
from __future__ import annotations

import torch


class ValueHead(torch.nn.Module):
    """Linear map hidden [B, T, H] -> V [B, T], zero-initialised so the critic starts at V = 0."""

    def __init__(self, hidden: int):
        super().__init__()
        self.proj = torch.nn.Linear(hidden, 1)
        torch.nn.init.zeros_(self.proj.weight)
        torch.nn.init.zeros_(self.proj.bias)

    def forward(self, hidden):
        return self.proj(hidden.float()).squeeze(-1)
