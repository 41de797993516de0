"""AEPO's entropy-aware advantage: the outcome advantage scaled up on tokens more uncertain than the batch.

    A_t = A_acc,t (1 + alpha Â_t),   Â_t = clip((H_t - mean_m H) / std_m H, -1, 1)

A chain entry: A_acc is the advantage already in the batch (e.g. `grpo` listed before it). The paper
("Agentic Entropy-Balanced Policy Optimization", abstract-only here) gives no formula we could check; the form
is the catalog's reading (see `aepo_entropy_advantage`). Its clipping half is `objectives/aepo_clip.py`.
"""
from __future__ import annotations

import torch

from workbench import ops, registry

AEPO_TITLE = "Agentic Entropy-Balanced Policy Optimization"


def entropy_zscore(entropy: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Â [B, T] = clip((H - mean) / std, -1, 1) over the valid tokens (population std); 0 where std = 0."""
    ops.check_mask(entropy, mask, "entropy")
    H = entropy.detach().double()
    std = ops.masked_var(H, mask.double(), unbiased=False).sqrt()
    if std == 0:
        return torch.zeros_like(H)
    return ((H - ops.masked_mean(H, mask.double())) / std).clamp(-1.0, 1.0)


@registry.advantage(
    "aepo-agentic-clip", title=AEPO_TITLE,
    summary="Entropy-aware advantage: the incoming advantage times (1 + alpha * clipped batch z-score of the token "
            "entropy), alpha = 0.1 (our reading of an abstract-only method).",
    equation=r"A_t = A^{acc}_t\,(1 + \alpha\,\hat A^{\Delta H}_t),\quad "
             r"\hat A^{\Delta H}_t = \mathrm{clip}\Big(\frac{H_t - \bar H}{\sigma_H}, -1, 1\Big)",
    reads=("entropy", "advantages"))
def aepo_entropy_advantage(batch, *, alpha=0.1):
    """Reads `advantages` (A_acc, from an earlier entry of the chain), `entropy` (the sampling policy's, detached)
    and `mask`; returns A_acc (1 + alpha Â) [B, T], 0 off the mask.

    Our reading (the paper is abstract-only here; catalog "decide"): Â is normalized against the valid tokens of
    the whole batch (mean and population std), clipped to [-1, 1] so that with alpha = 0.1 a token's advantage
    moves by at most 10 % and never changes sign (alpha must lie in [0, 1)); alpha = 0.1 is the catalog's choice.
    alpha = 0 returns A_acc unchanged.
    """
    if not 0 <= alpha < 1:
        raise ValueError(f"alpha must be in [0, 1) so that 1 + alpha * Â stays positive, got {alpha}")
    batch.require("advantages", "entropy")
    A = batch.advantages
    return A * (1 + alpha * entropy_zscore(batch.entropy, batch.mask).to(A.dtype)) * batch.mask.to(A.dtype)
