"""ExIt's diversity bonus: a rewarded answer far from its group's centroid earns more.

    phi_i   = embedding of answer i (unit vector)            c_g = mean_{j in g} phi_j
    d_i     = |phi_i - c_g|                                  dbar_g = mean_{j in g} d_j
    R_i    <- R_i (1 + kappa d_i / dbar_g)    if R_i > 0     (kappa = 0.2)
    R_i    <- R_i                             otherwise;     d_i / dbar_g := 0 when dbar_g = 0

Multiplicative, so a wrong answer stays wrong whatever its distance, and among right answers the divergent ones
get the larger GRPO advantage: it up-weights successful responses that explore a different solution.

Decisions (the card: "formula not known"; its reading R (1 + kappa d / mean d) for R > 0, kappa = 0.2): d is the
Euclidean distance to the centroid of all the group's answers (right and wrong), dbar the mean of d over the same
answers; identical answers (dbar = 0) give factor 1. The embedding is `workbench.text.features.prompt_features`
on the answer texts (hashed character 1-3-gram counts, unit length): the paper embeds with a model, which at our
scale means a fixed text embedding; on countdown it separates answers by which numbers and operators they use and in
what order. Groups are the batch's `group` ids.

Reference: none located (REFERENCES-AGENTS.md, section 5).
"""
from __future__ import annotations

from dataclasses import replace

import torch

from workbench import registry
from workbench.advantages.group import group_index
from workbench.text.features import prompt_features

EXIT_TITLE = "Bootstrapping Task Spaces for Self-Improvement"

EXIT_BONUS_LOGS = {
    "exit/diversity_factor": ("ExIt: mean multiplier 1 + kappa d / mean d over the rewarded answers (R > 0).",
                              "Near 1 + kappa = 1.2 when rewarded answers sit at a typical distance; 1.0 when the "
                              "group's answers are identical (no spread left to reward)."),
    "exit/centroid_distance": ("ExIt: mean distance of an answer's embedding from its group's centroid.",
                               "Falls as groups collapse onto one answer; near 0 means every group repeats itself."),
}


def centroid_distances(embeddings: torch.Tensor, group: torch.Tensor) -> torch.Tensor:
    """[B] d_i = |phi_i - c_g|, c_g the mean embedding of row i's group."""
    dense, counts = group_index(group)
    sums = torch.zeros(counts.shape[0], embeddings.shape[1], dtype=embeddings.dtype).index_add_(0, dense, embeddings)
    centroids = sums / counts[:, None].to(embeddings.dtype)
    return (embeddings - centroids[dense]).norm(dim=1)


def diversity_factor(distances: torch.Tensor, group: torch.Tensor, kappa: float) -> torch.Tensor:
    """[B] 1 + kappa d_i / mean_g d (1 where the group's mean distance is 0)."""
    dense, counts = group_index(group)
    mean = torch.zeros(counts.shape[0], dtype=distances.dtype).index_add_(0, dense, distances) / counts
    relative = torch.where(mean[dense] > 0, distances / mean[dense].clamp_min(1e-300), torch.zeros_like(distances))
    return 1.0 + kappa * relative


def check_exit_bonus(*, kappa=0.2, **_) -> None:
    if isinstance(kappa, bool) or not isinstance(kappa, (int, float)) or not kappa >= 0:
        raise ValueError(f"kappa must be a number >= 0 (the diversity bonus's weight; the card's 0.2, 0 turns it "
                         f"off), got {kappa!r}")


@registry.reward_shaping(
    "exit", title=EXIT_TITLE,
    summary="Multiplicative diversity bonus: a rewarded answer's reward times 1 + 0.2 d / mean d, d its embedding's "
            "distance from its group's centroid (hashed character n-grams of the answer text).",
    equation=r"R_i \leftarrow R_i\Big(1 + \kappa\,\frac{\lVert\phi_i - \bar\phi_g\rVert}{\overline{d}_g}\Big)"
             r"\ \text{if } R_i > 0",
    reads=("rewards", "group", "completions"), provides=("rewards",), logs=EXIT_BONUS_LOGS, check=check_exit_bonus)
def exit_bonus(batch, ctx, *, kappa=0.2):
    """Reads `rewards` [B], `group` [B] and the answers' texts; replaces `rewards`. kappa = 0 leaves them as they
    are. Logs exit/diversity_factor and exit/centroid_distance."""
    check_exit_bonus(kappa=kappa)
    if len(batch.completions) != batch.size:
        raise ValueError(f"exit's diversity bonus embeds the answers' texts: batch.completions has "
                         f"{len(batch.completions)} entries for {batch.size} rows")
    d = centroid_distances(prompt_features(list(batch.completions)), batch.group)
    factor = diversity_factor(d, batch.group, float(kappa))
    rewarded = batch.rewards > 0
    rewards = torch.where(rewarded, batch.rewards * factor.to(batch.rewards.dtype), batch.rewards)
    ctx.metrics.update({"exit/diversity_factor": float(factor[rewarded].mean()) if rewarded.any() else 1.0,
                        "exit/centroid_distance": float(d.mean()) if d.numel() else 0.0})
    return replace(batch, rewards=rewards)
