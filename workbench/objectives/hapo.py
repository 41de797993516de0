"""HAPO's entropy-heterogeneous surrogate: differential advantage redistribution and asymmetric adaptive clipping.

Every token gets a normalized entropy h_hat in [-1, 1] (positive: more uncertain than the pivot quantile):

    h      = (log H_t - q_p(log H)) / s,   s = sqrt(mean_m (log H - q_p)^2)     (p = entropy_pivot = 0.8)
    h_hat  = h / max(h > 0)   for h > 0,     h / |min(h < 0)|   for h <= 0      (clipped to [-1, 1])

    eps_low'  = eps_low (1 - alpha h_hat)   on low-entropy tokens (h_hat <= 0): they may be pushed down further
    eps_high' = eps_high (1 + alpha h_hat)  on high-entropy tokens (h_hat > 0): they may be pushed up further
    A'        = A (1 + beta h_hat)          on high-entropy tokens whose ratio left the neutral zone
                                            (1 - eps_low'/2, 1 + eps_high'/2), and on low-entropy tokens inside it
    l         = PPO-clip(r, A', eps_low', eps_high') with the dual-clip cap -c A' (c = 10) on A' < 0

Reference: starriver030515/HAPO `verl/trainer/ppo/core_algos.py` (`compute_entropy_h`, `ada_clip`, `ada_advantage`,
`compute_policy_loss`). The code's `compute_entropy_h` multiplies h <= 0 by 1/min(h < 0), a negative number, so
every low-entropy token gets h_hat >= 0 and the low-entropy branches fire only at h_hat = 0; `reference_bug=True`
reproduces it. The same normalization drives the sampler's temperature (`workbench.rollout.hapo_temperature`).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from workbench import ops, registry
from workbench.advantages.hapo import HAPO_TITLE
from workbench.objectives.ppo import CLIP_LOGS, DUAL_CLIP_LOGS, check_inputs, clip_metrics, ppo_clip_per_token, ratio


@dataclass(frozen=True)
class EntropyStats:
    """What maps a token entropy to h_hat: the pivot of log H, its spread s, and max(h > 0), min(h < 0)."""

    pivot: float
    std: float
    pos_max: float
    neg_min: float


def nearest_quantile(values: torch.Tensor, q: float) -> torch.Tensor:
    """The q-quantile of a 1-d tensor, 'nearest' interpolation: sorted[round(q (n - 1))] with Python's round
    (half to even), as HAPO's `torch_quantile(..., interpolation="nearest")`."""
    return values.sort().values[round(q * (values.numel() - 1))]


def entropy_stats(entropy: torch.Tensor, mask: torch.Tensor, *, pivot_quantile: float = 0.8,
                  eps: float = 1e-8) -> EntropyStats:
    """Statistics of log H over the valid tokens of entropy [B, T] (HAPO `compute_entropy_h`): the pivot is the
    `pivot_quantile` of log H, s the root mean square of log H - pivot (about the pivot, not the mean; floored at
    sqrt(eps)), pos_max = max(h > 0) (at least eps), neg_min = min(h < 0) (at most -eps)."""
    ops.check_mask(entropy, mask, "entropy")
    if not 0.0 <= pivot_quantile <= 1.0:
        raise ValueError(f"pivot_quantile (entropy_pivot) must be in [0, 1], got {pivot_quantile}")
    with torch.no_grad():
        valid = mask > 0
        log_h = torch.log(entropy.detach().clamp(min=eps))
        pivot = nearest_quantile(log_h[valid], pivot_quantile)
        centred = log_h - pivot
        std = (centred[valid].pow(2).sum() / valid.sum()).clamp(min=eps).sqrt()
        h = centred[valid] / std
        pos_max = h.clamp(min=0).max().clamp(min=eps)   # max over h > 0 (0 when none), floored
        neg_min = h.clamp(max=0).min().clamp(max=-eps)  # min over h < 0 (0 when none), capped
    return EntropyStats(float(pivot), float(std), float(pos_max), float(neg_min))


def normalized_entropy(entropy: torch.Tensor, stats: EntropyStats, *, eps: float = 1e-8,
                       reference_bug: bool = False) -> torch.Tensor:
    """h_hat [B, T] in [-1, 1] of entropy [B, T] under `stats` (detached). reference_bug=True: the code's
    h * (1 / neg_min) on h <= 0, which is >= 0 (every token counts as high-entropy or neutral)."""
    with torch.no_grad():
        h = (torch.log(entropy.detach().clamp(min=eps)) - stats.pivot) / stats.std
        scale_neg = 1.0 / stats.neg_min if reference_bug else 1.0 / -stats.neg_min
        return torch.where(h > 0, h * (1.0 / stats.pos_max), h * scale_neg).clamp(-1.0, 1.0)


def adaptive_clip_bounds(h_hat, eps_low, eps_high, clip_alpha):
    """(eps_low', eps_high') [B, T]: eps_low (1 - alpha h_hat) where h_hat <= 0, eps_high (1 + alpha h_hat) where
    h_hat > 0, the base bound elsewhere (HAPO `ada_clip`). Both only widen, so they stay positive."""
    base_low, base_high = torch.full_like(h_hat, eps_low), torch.full_like(h_hat, eps_high)
    low = torch.where(h_hat <= 0, base_low * (1 - h_hat * clip_alpha), base_low)
    high = torch.where(h_hat > 0, base_high * (1 + h_hat * clip_alpha), base_high)
    return low, high


def redistributed_advantages(advantages, h_hat, r, eps_low, eps_high, adv_beta):
    """(A' [B, T], scaled [B, T] bool) of HAPO `ada_advantage`: A (1 + beta h_hat) on high-entropy tokens outside
    the neutral zone (1 - eps_low/2, 1 + eps_high/2) of the detached ratio r, and on low-entropy tokens inside it."""
    with torch.no_grad():
        inside = (r > 1.0 - eps_low / 2) & (r < 1.0 + eps_high / 2)
        scaled = torch.where(h_hat > 0, ~inside, inside)
        return torch.where(scaled, advantages * (1 + adv_beta * h_hat), advantages), scaled


def check_hyper_parameters(eps_low, eps_high, dual_clip_c, clip_alpha, adv_beta, entropy_pivot) -> None:
    if not (eps_low >= 0 and eps_high >= 0):
        raise ValueError(f"eps_low and eps_high must be >= 0, got {eps_low}, {eps_high}")
    if not clip_alpha >= 0:
        raise ValueError(f"clip_alpha must be >= 0 (it widens the bounds), got {clip_alpha}")
    if not eps_low * (1 + clip_alpha) < 1:
        raise ValueError(f"eps_low * (1 + clip_alpha) must be < 1 so the lower ratio bound 1 - eps_low' stays "
                         f"positive for every |h_hat| <= 1, got eps_low={eps_low}, clip_alpha={clip_alpha}")
    if not 0 <= adv_beta <= 1:
        raise ValueError(f"adv_beta must be in [0, 1] so that A (1 + beta h_hat) never flips the sign of A, "
                         f"got {adv_beta}")
    if not 0 <= entropy_pivot <= 1:
        raise ValueError(f"entropy_pivot must be in [0, 1], got {entropy_pivot}")
    if dual_clip_c is not None and not dual_clip_c > 1:
        raise ValueError(f"dual_clip_c must be > 1 (or None: no cap), got {dual_clip_c}")


HAPO_LOGS = {
    "hapo/high_entropy_frac": ("HAPO: share of tokens with h_hat > 0 (log-entropy above its 0.8 quantile).",
                               "About 0.2 (the 0.8 quantile; 0.13 to 0.2 on the smoke run). 0 or 1: entropy "
                               "collapsed."),
    "hapo/redistributed_frac": ("HAPO: share of tokens whose advantage was rescaled by (1 + beta h_hat).",
                                "1 - high_entropy_frac on-policy (r = 1: 0.7 to 0.75 on the smoke run); moves with r."),
    "hapo/eps_low_mean": ("HAPO: mean adapted lower clip eps_low (1 - alpha h_hat) (wider on low-entropy tokens).",
                          "Between eps_low and eps_low (1 + alpha): 0.25 on the smoke run. Stuck at eps_low: no "
                          "spread."),
    "hapo/eps_high_mean": ("HAPO: mean adapted upper clip eps_high (1 + alpha h_hat) (wider on high-entropy tokens).",
                           "A little above eps_high (0.21 to 0.22 on the smoke run). Stuck at eps_high: no spread."),
}


@registry.objective(
    "hapo", title=HAPO_TITLE,
    summary="PPO-clip with entropy-adaptive asymmetric bounds (wider upper bound for high-entropy tokens, wider "
            "lower bound for low-entropy ones), advantages rescaled by (1 + beta h_hat) by entropy and ratio, "
            "dual-clip c = 10.",
    equation=r"\hat h = \frac{h}{\max h^+}\ (h>0),\ \frac{h}{|\min h^-|}\ (h\le 0),\ "
             r"h = \frac{\log H_t - q_{0.8}(\log H)}{s};\ "
             r"\epsilon'_{high} = \epsilon_{high}(1+\alpha\hat h)_{\hat h>0},\ "
             r"\epsilon'_{low} = \epsilon_{low}(1-\alpha\hat h)_{\hat h\le 0};\ "
             r"A' = A(1+\beta\hat h)\ \text{if}\ (\hat h>0) \ne (r \in (1-\tfrac{\epsilon'_{low}}{2}, "
             r"1+\tfrac{\epsilon'_{high}}{2}));\ \ell = \mathrm{PPO\text{-}clip}(r, A', \epsilon'_{low}, "
             r"\epsilon'_{high}, c)",
    reads=("entropy",), logs={**CLIP_LOGS, **DUAL_CLIP_LOGS, **HAPO_LOGS})
def hapo(logp, old_logp, advantages, mask, *, entropy, agg="token-mean", denom=None, eps_low=0.2, eps_high=0.2,
         dual_clip_c=10.0, clip_alpha=1.0, adv_beta=1.0, entropy_pivot=0.8, reference_bug=False, logr_clamp=None):
    """HAPO's policy loss. `entropy` [B, T] is the batch's (detached) token entropy: the sampling policy's
    (`batch.entropy`; on a one-step on-policy update the training forward's, which is the same policy). HAPO's
    code normalizes the training forward's entropy of each micro-batch; here the statistics are those of the
    minibatch the objective sees.

    Defaults from `recipe/qwen2.5_math_7b.sh` (all HAPO recipes): clip_ratio_low = clip_ratio_high = 0.2,
    clip_ratio_c = 10, entropy_pivot = 0.8, clip_alpha = 1, adv_beta = 1; no log-ratio clamp (HAPO's
    `compute_policy_loss` has none). clip_alpha = adv_beta = 0 is PPO-clip with dual clip c (and with
    dual_clip_c=None, plain `ppo-clip`). reference_bug: see the module docstring (default: the intended mapping).

    Metrics: PPO clip fractions at the adapted bounds (clip/dual for the cap), `hapo/high_entropy_frac` (share of
    tokens with h_hat > 0), `hapo/redistributed_frac` (share whose advantage was rescaled), `hapo/eps_low_mean`,
    `hapo/eps_high_mean` (mean adapted bounds).
    """
    check_hyper_parameters(eps_low, eps_high, dual_clip_c, clip_alpha, adv_beta, entropy_pivot)
    check_inputs(logp, old_logp, advantages, mask)
    if entropy.shape != logp.shape:
        raise ValueError(f"entropy has shape {tuple(entropy.shape)} but logp has shape {tuple(logp.shape)}")
    old = old_logp.detach()
    h_hat = normalized_entropy(entropy, entropy_stats(entropy, mask, pivot_quantile=entropy_pivot),
                               reference_bug=reference_bug).to(logp.dtype)
    low, high = adaptive_clip_bounds(h_hat, eps_low, eps_high, clip_alpha)
    adv, scaled = redistributed_advantages(advantages, h_hat, ratio(logp.detach(), old, logr_clamp), low, high,
                                           adv_beta)
    per_token, r, dual = ppo_clip_per_token(logp, old, adv, eps_low=low, eps_high=high, dual_clip_c=dual_clip_c,
                                            logr_clamp=logr_clamp)
    loss = ops.aggregate(per_token, mask, agg, denom)
    metrics = clip_metrics(r.detach(), adv, mask, low, high, dual)
    metrics.update({"hapo/high_entropy_frac": float(ops.masked_mean((h_hat > 0).to(mask.dtype), mask)),
                    "hapo/redistributed_frac": float(ops.masked_mean(scaled.to(mask.dtype), mask)),
                    "hapo/eps_low_mean": float(ops.masked_mean(low, mask)),
                    "hapo/eps_high_mean": float(ops.masked_mean(high, mask))})
    return loss, metrics
