"""GBPO's two signals: the GRPO z-score (weights the loss) and a median-centred target advantage (sets the target
ratio the objective `gbpo` regresses the ratio to).

    A_i          = (R_i - mean_g R) / (std_g R + eps)                      (grpo, Bessel std)
    target_adv_i = ((R_i - median_g R) / (std_g R + eps)) / T              (T = gbpo temperature)

The bandit optimum of max E[(pi/pi0) A] s.t. 1 - eps <= pi/pi0 <= 1 + eps moves probability up by (1 + eps) on
the actions above the median of Q under pi0 and down by (1 - eps) below it; sigma(target_adv) is the smooth
version of that split (sharp as T -> 0).

Reference: bounded-ratio-rl/bounded_ratio_rl `src/verl/trainer/ppo/core_algos.py::
compute_gbpo_outcome_advantage_and_target` (commit 64ff1cd); `gbpo_temperature: 1.0` in
`src/verl/trainer/config/ppo_trainer.yaml`.
"""
from __future__ import annotations

import torch

from workbench import registry
from workbench.advantages.base import broadcast, sequence_rewards
from workbench.advantages.group import KEYED_SINGLETONS, group_index, group_stats, grpo
from workbench.batch import RolloutBatch


def group_median(x: torch.Tensor, group: torch.Tensor) -> torch.Tensor:
    """Per-row median of x [B] over its group, linearly interpolated for even sizes (torch.quantile(., 0.5))."""
    dense, counts = group_index(group)
    medians = torch.stack([torch.quantile(x[dense == g], 0.5) for g in range(counts.shape[0])])
    return medians[dense]


def target_advantage(rewards: torch.Tensor, group: torch.Tensor, *, temperature=1.0, eps=1e-6,
                     singletons="zero") -> torch.Tensor:
    """((R - median_g R) / (std_g R + eps)) / T per row [B]. A group of one has no median: "zero" gives it 0,
    "keep" the reference's median 0 and std 1, i.e. R / ((1 + eps) T)."""
    if not temperature > 0:
        raise ValueError(f"temperature (gbpo_temperature) must be > 0, got {temperature}")
    if singletons not in KEYED_SINGLETONS:
        raise ValueError(f"singletons must be one of {KEYED_SINGLETONS}, got {singletons!r}")
    _, std, sizes = group_stats(rewards, group)
    single = sizes < 2
    median = group_median(rewards, group)
    if singletons == "keep":
        median, std = median.masked_fill(single, 0.0), std.masked_fill(single, 1.0)
    centred = ((rewards - median) / (std + eps)) / temperature
    return centred if singletons == "keep" else centred.masked_fill(single, 0.0)


@registry.advantage(
    "gbpo", title="Bounded Ratio Reinforcement Learning",
    summary="GRPO z-score advantage plus GBPO's target advantage (R - median_g R)/(std_g R + eps)/T, stored in "
            "batch.target_adv for the gbpo objective's target ratio.",
    equation=r"A_i = \frac{R_i - \mathrm{mean}_g R}{\mathrm{std}_g R + \epsilon},\quad "
             r"\hat A_i = \frac{R_i - \mathrm{median}_g R}{T(\mathrm{std}_g R + \epsilon)}",
    reads=("rewards", "group"), provides=("target_adv",))
def gbpo(batch: RolloutBatch, *, temperature=1.0, eps=1e-6, allow_singletons=False):
    """Returns the `grpo` advantage [B, T] (verl's GRPO conventions: Bessel std, eps 1e-6) and sets
    `batch.target_adv` [B, T] (the reference's `gbpo_target_adv`), both broadcast over the response mask.

    temperature: the reference's `gbpo_temperature` (default 1.0 from ppo_trainer.yaml; its TTRL scripts use
    1e-4, a nearly binary split). Rewards are the outcome plus summed token rewards, as the reference's
    `token_level_rewards.sum(-1)`. Groups of one: an error unless `allow_singletons`; True gives A = target_adv = 0,
    "keep" the reference's mean 0, std 1, median 0 (A = R / (1 + eps), target_adv = A / T).
    """
    if not temperature > 0:
        raise ValueError(f"temperature (gbpo_temperature) must be > 0, got {temperature}")
    advantages = grpo(batch, eps=eps, allow_singletons=allow_singletons)
    target = target_advantage(sequence_rewards(batch), batch.group, temperature=temperature, eps=eps,
                              singletons="keep" if allow_singletons == "keep" else "zero")
    batch.target_adv = broadcast(target, batch.mask)
    return advantages
