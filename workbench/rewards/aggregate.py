"""Several rewards into one: TRL's `multi_objective_aggregation`, NaN-aware (None = "not applicable").

    sum_then_normalize   R_i = sum_k w_k r_ik                                  (TRL's default; then the advantage)
    normalize_then_sum   R_i = sum_k w_k (r_ik - mean_g r_k) / (std_g r_k + 1e-4)   (GDPO-style, per group g)

Missing values (NaN) are left out of every sum, mean and std (TRL's nansum / nanmean / nanstd); a row with no
value from any reward is *unscorable*.

After normalize_then_sum TRL z-scores R over the whole batch; our advantage does what the recipe says (grpo: per
group by default). `grpo` with `scale="batch"` and `eps=1e-4` is TRL's (tests/anchors/test_trl_rewards.py).
"""
from __future__ import annotations

import torch

from workbench.advantages.group import keyed_normalize

AGGREGATIONS = ("sum_then_normalize", "normalize_then_sum")
STD_EPS = 1e-4  # TRL grpo_trainer: (grouped - mean_k) / (std_k + 1e-4)


def nanstd(x: torch.Tensor, dim: int = 0, keepdim: bool = False) -> torch.Tensor:
    """Bessel-corrected std ignoring NaN (TRL `trainer.utils.nanstd`); NaN with fewer than two values."""
    n = (~torch.isnan(x)).sum(dim=dim, keepdim=True)
    mean = torch.nanmean(x, dim=dim, keepdim=True)
    std = (torch.nansum((x - mean) ** 2, dim=dim, keepdim=True) / (n - 1)).sqrt()
    return std if keepdim else std.squeeze(dim)


def group_normalized(values: torch.Tensor, group: torch.Tensor) -> torch.Tensor:
    """(r - mean_g r) / (std_g r + 1e-4) per column of values [B, K] over the rows of each group [B] where that
    reward applies (NaN stays NaN); a group with one such value gets 0 there (TRL: zeros when num_generations = 1)."""
    out = torch.full_like(values, float("nan"))
    for k in range(values.shape[1]):
        applies = ~torch.isnan(values[:, k])
        out[applies, k] = keyed_normalize(values[applies, k], group[applies].tolist(), eps=STD_EPS,
                                          singletons="zero")
    return out


def combine(values: torch.Tensor, weights: torch.Tensor, group: torch.Tensor, mode: str = "sum_then_normalize"):
    """R [B] from per-reward values [B, K] (NaN = not applicable) and weights [K]; and the unscorable rows [B]
    (every value NaN), whose R is NaN."""
    if mode not in AGGREGATIONS:
        raise ValueError(f"unknown reward_aggregation {mode!r}; choose one of {AGGREGATIONS}")
    if values.dim() != 2 or values.shape[1] != weights.shape[0]:
        raise ValueError(f"values [B, K] and weights [K] disagree: {tuple(values.shape)} vs {tuple(weights.shape)}")
    unscorable = torch.isnan(values).all(dim=1)
    if mode == "normalize_then_sum":
        values = group_normalized(values, group)
    rewards = (values * weights.to(values.dtype)).nansum(dim=1)
    return rewards.masked_fill(unscorable, float("nan")), unscorable
