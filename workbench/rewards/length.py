"""Length rewards: DAPO's soft overlong punishment."""
from __future__ import annotations

import torch

from workbench import registry


def soft_overlong(rewards: torch.Tensor, lengths: torch.Tensor, *, max_len: int, buffer=4, factor=1.0):
    """DAPO soft overlong punishment (TRL `get_soft_overlong_punishment`), scaled by `factor`.

    rewards, lengths: [B]. max_len = L (the response budget), buffer = C (the paper uses L=20480, C=4096).
    A response cut at the budget has |y| = L and gets -factor, the largest penalty reachable here.
    """
    if not 0 < buffer <= max_len:
        raise ValueError(f"soft-overlong needs 0 < buffer <= max_len, got buffer={buffer}, max_len={max_len}")
    lengths = lengths.to(torch.float64)
    excess = lengths - (max_len - buffer)
    penalty = torch.where(lengths > max_len, -torch.ones_like(lengths), -(excess / buffer).clamp(min=0))
    return rewards + factor * penalty.to(rewards.dtype)


@registry.reward(
    "soft-overlong", title="DAPO: An Open-Source LLM Reinforcement Learning System at Scale",
    summary="Linear length penalty inside the last `buffer` tokens of the budget, -1 beyond it, added to R.",
    equation=r"r_{len} = \begin{cases}0 & |y|\le L-C\\ \frac{(L-C)-|y|}{C} & L-C<|y|\le L\\ -1 & |y|>L\end{cases}")
def soft_overlong_reward(completions, completion_ids, *, max_new_tokens, buffer=4, factor=1.0, max_completion_len=None,
                         **columns) -> list[float]:
    """TRL's reward signature: the penalty alone (`soft_overlong` of zero rewards) for each completion, from its
    token count |y| = len(completion_ids[i]) (EOS included). The budget L is `max_completion_len`, or the run's
    `max_new_tokens` (every reward function receives it) when None."""
    lengths = torch.tensor([len(ids) for ids in completion_ids], dtype=torch.float64)
    budget = max_new_tokens if max_completion_len is None else max_completion_len
    return soft_overlong(torch.zeros_like(lengths), lengths, max_len=budget, buffer=buffer, factor=factor).tolist()
