"""Token masks: which response tokens the update trains on (`fn(batch, **hp) -> mask [B, T]`).

They run after the advantage (see workbench/train/pipeline.py), so a mask may read `advantages` (LOOP).
"""
from __future__ import annotations

import torch

from workbench import registry
from workbench.batch import RolloutBatch


# Each token mask declares the share of rollouts it empties, which the pipeline logs as filtered_frac/<key>.
OVERLONG_FILTER_LOGS = {
    "filtered_frac/overlong-filter": ("Share of rollouts masked out because they were truncated (no EOS in the "
                                      "budget).",
                                      "Equal to truncated_frac and near 0. High: most of the batch gives no gradient "
                                      "at all; raise max_new_tokens or train shorter answers first."),
}


@registry.token_mask(
    "overlong-filter", title="DAPO: An Open-Source LLM Reinforcement Learning System at Scale",
    summary="Zero the mask of responses truncated at max_new_tokens (no EOS): no reward noise from cut-offs.",
    equation=r"m_{i,\cdot} \leftarrow 0 \text{ if } y_i \text{ has no EOS}", reads=("truncated",),
    logs=OVERLONG_FILTER_LOGS)
def overlong_filter(batch: RolloutBatch) -> torch.Tensor:
    """Reads `mask`, `truncated`; returns the mask [B, T] with truncated rows zeroed.

    The filtered rows also leave global token-mean denominators (they are not counted), the choice
    TRL's `mask_truncated_completions` makes.
    """
    batch.require("truncated")
    return batch.mask * (~batch.truncated.bool())[:, None].to(batch.mask.dtype)


HIGH_ENTROPY_MASK_LOGS = {
    "filtered_frac/high-entropy-mask": ("Share of rollouts left with no token after keeping only the high-entropy "
                                        "ones.",
                                        "0 with rho = 1 (a no-op); about 0.1 to 0.25 with rho = 0.2 on the smoke "
                                        "run. Rising: whole responses are confident everywhere and drop out of the "
                                        "update."),
}


@registry.token_mask(
    "high-entropy-mask",
    title="Beyond the 80/20 Rule: High-Entropy Minority Tokens Drive Effective Reinforcement Learning for "
          "LLM Reasoning",
    summary="Train only on the top-rho fraction of valid tokens by entropy (the 'forking' tokens).",
    equation=r"\tau_H = Q_{1-\rho}\{H_t : m_t = 1\},\quad m'_t = m_t\,[H_t \ge \tau_H]", reads=("entropy",),
    logs=HIGH_ENTROPY_MASK_LOGS)
def high_entropy_mask(batch: RolloutBatch, *, top_entropy_quantile=1.0) -> torch.Tensor:
    """Reads `mask`, `entropy` (detached); returns the mask [B, T] keeping tokens with H_t >= tau_H.

    tau_H is the (1 - rho) quantile, linear interpolation (torch.quantile's default, TRL
    `get_high_entropy_mask`), of the entropies of all valid tokens of the batch (TRL gathers them across
    ranks first; here the batch is the whole set). rho = `top_entropy_quantile`: 1.0 is a no-op (TRL
    default; entropy not needed), the paper uses 0.2. The new mask applies to the PG loss and the entropy
    bonus; ties at tau_H are all kept, so the kept fraction is rho up to ties and 1/n rounding.
    """
    rho = float(top_entropy_quantile)
    if not 0.0 < rho <= 1.0:
        raise ValueError(f"top_entropy_quantile must be in (0, 1], got {top_entropy_quantile}")
    if rho == 1.0:
        return batch.mask.clone()
    batch.require("entropy")
    valid = batch.mask > 0
    if not bool(valid.any()):
        return batch.mask.clone()
    H = batch.entropy.detach().double()
    values = H[valid].sort().values
    # Linear-interpolated quantile, written out because torch.quantile refuses inputs > 2**24 elements.
    pos = (values.numel() - 1) * (1.0 - rho)
    lo, hi = int(pos), min(int(pos) + 1, values.numel() - 1)
    tau = values[lo] + (values[hi] - values[lo]) * (pos - lo)
    return (valid & (H >= tau)).to(batch.mask.dtype)


MIN_ABS_ADVANTAGE_LOGS = {
    "filtered_frac/min-abs-advantage": ("Share of rollouts dropped for a near-zero advantage (LOOP's |A| < 0.01 "
                                        "filter).",
                                        "Small; it rises together with frac_zero_std_groups."),
}


@registry.token_mask(
    "min-abs-advantage", title="Reinforcement Learning for Long-Horizon Interactive LLM Agents", family="canonical",
    summary="Drop whole rollouts whose advantage is below a threshold in absolute value (LOOP: 0.01).",
    equation=r"m_{i,\cdot} \leftarrow 0 \text{ if } \max_t |A_{i,t}| < \delta", reads=("advantages",),
    logs=MIN_ABS_ADVANTAGE_LOGS)
def min_abs_advantage(batch: RolloutBatch, *, threshold=0.01) -> torch.Tensor:
    """Reads `mask`, `advantages`; returns the mask [B, T] with rows of max |A| < threshold zeroed (they carry
    almost no signal and only dilute the token-mean denominator)."""
    batch.require("advantages")
    keep = batch.advantages.abs().amax(-1) >= threshold
    return batch.mask * keep[:, None].to(batch.mask.dtype)
