"""PPO's clipped surrogate with decoupled bounds (clip-higher) and the dual-clip cap.

    r = exp(logp - old)                    token ratio (r = 1 on the first step after a rollout)
    l = -min(r A, clip(r, 1 - eps_low, 1 + eps_high) A)
    dual clip (A < 0): l = min(l, -c A)    bounds the loss when r >> 1 on a bad token
"""
from __future__ import annotations

import torch

from workbench import ops, registry

PPO_TITLE = "Proximal Policy Optimization Algorithms"


def ratio(logp, old_logp, logr_clamp=None):
    """r = exp(logp - old); verl/OpenRLHF clamp the log-ratio to +-20, TRL does not (None)."""
    logr = logp - old_logp
    return torch.exp(logr if logr_clamp is None else logr.clamp(-logr_clamp, logr_clamp))


# What `clip_metrics` logs; every objective that logs one of them declares it from here.
CLIP_LOGS = {
    "kl/k1_old": ("mean(old_logp - logp): how far the update moved from the sampling policy (cleanrl old_approx_kl).",
                  "Tiny, about 0 with one optimizer step per batch. Can be negative: it is an unbiased but noisy "
                  "estimate."),
    "kl/k3_old": ("mean((r - 1) - log r), a non-negative estimate of the same drift (cleanrl approx_kl).",
                  "Small and never negative. PPO implementations often stop the epoch loop around 0.01 to 0.02; "
                  "spikes flag an oversized step."),
    "clip/region": ("Fraction of tokens where PPO's clipped branch is active (clip/low + clip/high); 0 on the first "
                    "minibatch after a rollout since r = 1 there.",
                    "Exactly 0 with one optimizer step per batch, a few percent with several. Tens of percent: the "
                    "step size is too large for the clip range."),
    "clip/high": ("Fraction of tokens with A > 0 and r > 1 + eps_high (update stopped from pushing further up).",
                  "A few percent at most. Persistently high: updates keep hitting the upper bound, which DAPO's "
                  "clip-higher (eps_high = 0.28) relaxes."),
    "clip/low": ("Fraction of tokens with A < 0 and r < 1 - eps_low.",
                 "A few percent at most; it grows with the number of optimizer steps per batch."),
    "clip/out_of_band": ("Fraction of tokens with r outside [1 - eps_low, 1 + eps_high], whatever the sign of A.",
                         "At least clip/region. The gap is tokens that moved against their advantage, which the clip "
                         "does not stop."),
    "ratio/mean": ("Mean importance ratio pi/pi_old over valid tokens (1 when on-policy).",
                   "Within a few thousandths of 1."),
    "ratio/max": ("Largest token ratio in the batch: spikes flag unstable updates.",
                  "Modest (below 2 or 3). Occasional spikes are normal; growing spikes mean instability or stale "
                  "data."),
}


# What `clip_metrics` adds with a dual-clip cap (`dual_clip_c`).
DUAL_CLIP_LOGS = {
    "clip/dual": ("Fraction of tokens where the dual-clip cap -c A is active.",
                  "Near 0; only logged with a dual-clip cap. Rising: the ratios of bad tokens blow up (stale data)."),
}


def clip_metrics(r, advantages, mask, eps_low, eps_high, dual_active=None) -> dict[str, float]:
    """Active-clip fractions (the clipped branch is selected) and the out-of-band fraction |r-1| > eps."""
    with torch.no_grad():
        high = (r > 1 + eps_high) & (advantages > 0)
        low = (r < 1 - eps_low) & (advantages < 0)
        out = (r > 1 + eps_high) | (r < 1 - eps_low)
        logr = torch.log(r)
        m = {
            "clip/high": ops.masked_mean(high.to(mask.dtype), mask),
            "clip/low": ops.masked_mean(low.to(mask.dtype), mask),
            "clip/out_of_band": ops.masked_mean(out.to(mask.dtype), mask),
            "kl/k1_old": ops.masked_mean(-logr, mask),
            "kl/k3_old": ops.masked_mean(torch.expm1(logr) - logr, mask),
            "ratio/mean": ops.masked_mean(r, mask),
            "ratio/max": (r * mask).max(),
        }
        m["clip/region"] = m["clip/high"] + m["clip/low"]
        if dual_active is not None:
            m["clip/dual"] = ops.masked_mean(dual_active.to(mask.dtype), mask)
    return {k: float(v) for k, v in m.items()}


def ppo_clip_per_token(logp, old_logp, advantages, *, eps_low, eps_high, dual_clip_c=None, logr_clamp=None):
    """Per-token PPO loss [B, T], the ratio, and where the dual-clip cap is active."""
    r = ratio(logp, old_logp, logr_clamp)
    unclipped = -advantages * r
    clipped = -advantages * r.clamp(1 - eps_low, 1 + eps_high)
    loss = torch.maximum(unclipped, clipped)
    dual_active = None
    if dual_clip_c is not None:
        if dual_clip_c <= 1:
            raise ValueError(f"dual_clip_c must be > 1, got {dual_clip_c}")
        capped = torch.minimum(loss, -advantages * dual_clip_c)
        dual_active = (advantages < 0) & (loss > -advantages * dual_clip_c)
        loss = torch.where(advantages < 0, capped, loss)
    return loss, r, dual_active


def check_inputs(logp, old_logp, advantages, mask):
    for name, x in (("old_logp", old_logp), ("advantages", advantages)):
        if x.shape != logp.shape:
            raise ValueError(f"{name} has shape {tuple(x.shape)} but logp has shape {tuple(logp.shape)}")
    ops.check_mask(logp, mask, "logp")
    if not bool(torch.isfinite(advantages[mask > 0]).all()):
        raise ValueError("advantages contain NaN/inf on valid tokens")


@registry.objective(
    "ppo-clip", title=PPO_TITLE,
    summary="Clipped ratio surrogate with decoupled eps_low / eps_high and optional dual-clip cap c.",
    equation=r"\ell = -\min\big(rA,\ \mathrm{clip}(r, 1-\epsilon_{low}, 1+\epsilon_{high})A\big)",
    logs={**CLIP_LOGS, **DUAL_CLIP_LOGS})
def ppo_clip(logp, old_logp, advantages, mask, *, agg="token-mean", denom=None, eps_low=0.2, eps_high=0.2,
             dual_clip_c=None, logr_clamp=None):
    """PPO-clip. eps_high = 0.28 is DAPO's clip-higher; dual_clip_c = 3.0 is verl's `clip_ratio_c`."""
    check_inputs(logp, old_logp, advantages, mask)
    per_token, r, dual = ppo_clip_per_token(logp, old_logp, advantages, eps_low=eps_low, eps_high=eps_high,
                                            dual_clip_c=dual_clip_c, logr_clamp=logr_clamp)
    loss = ops.aggregate(per_token, mask, agg, denom)
    return loss, clip_metrics(r.detach(), advantages, mask, eps_low, eps_high, dual)


@registry.objective(
    "dual-clip", title="Mastering Complex Control in MOBA Games with Deep Reinforcement Learning",
    summary="PPO-clip whose loss on negative-advantage tokens is capped at -c A (c = 3).",
    equation=r"A<0:\ \ell = \min\big(\max(-rA, -\mathrm{clip}(r)A),\ -cA\big)", logs={**CLIP_LOGS, **DUAL_CLIP_LOGS})
def dual_clip(logp, old_logp, advantages, mask, *, agg="token-mean", denom=None, eps_low=0.2, eps_high=0.2,
              dual_clip_c=3.0, logr_clamp=None):
    return ppo_clip(logp, old_logp, advantages, mask, agg=agg, denom=denom, eps_low=eps_low,
                    eps_high=eps_high, dual_clip_c=dual_clip_c, logr_clamp=logr_clamp)
