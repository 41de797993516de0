"""Reward shaping: transforms of outcome rewards that also read response lengths."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from workbench import registry


@registry.reward(
    "soft-overlong", title="DAPO: An Open-Source LLM Reinforcement Learning System at Scale",
    summary="Linear length penalty inside the last `buffer` tokens of the budget, -1 beyond it, added to R.",
    equation=r"r_{len} = \begin{cases}0 & |y|\le L-C\\ \frac{(L-C)-|y|}{C} & L-C<|y|\le L\\ -1 & |y|>L\end{cases}")
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


@dataclass
class RunningMoments:
    """Running mean and variance of every reward seen so far (Chan et al.'s parallel update)."""

    count: float = 0.0
    mean: float = 0.0
    m2: float = 0.0

    def update(self, x: torch.Tensor) -> None:
        n, mean, var = float(x.numel()), float(x.double().mean()), float(x.double().var(unbiased=False))
        delta, total = mean - self.mean, self.count + n
        self.m2 += var * n + delta ** 2 * self.count * n / total
        self.mean += delta * n / total
        self.count = total

    @property
    def std(self) -> float:
        return (self.m2 / self.count) ** 0.5 if self.count else 1.0


@registry.reward(
    "ppo-max", title="Secrets of RLHF in Large Language Models Part I: PPO",
    summary="PPO-max's reward trick: normalize rewards by running statistics, then clip to [-delta, delta].",
    equation=r"r \leftarrow \mathrm{clip}\Big(\frac{r - \mu_r}{\sigma_r}, -\delta, \delta\Big)")
def normalize_and_clip(rewards: torch.Tensor, lengths: torch.Tensor, *, max_len: int, state: RunningMoments,
                       delta=5.0, normalize=True, clip=True):
    """Updates `state` with this batch first, then shifts/scales by the running moments and clips.

    delta = 5 (`unverified`: MOSS-RLHF's reward_clip); each of normalize/clip can be switched off.
    """
    if normalize:
        state.update(rewards)
        rewards = (rewards - state.mean) / max(state.std, 1e-8)
    return rewards.clamp(-delta, delta) if clip else rewards


normalize_and_clip.init_state = RunningMoments  # the loop keeps (and checkpoints) one state per run
