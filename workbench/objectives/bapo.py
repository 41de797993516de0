"""BAPO: dual-clip PPO whose ratio bounds are searched, per batch, until positive tokens carry a target share.

    r = exp(logp - old)                        explicit bounds c_low < 1 < c_high (not 1 -+ eps)
    pos = sum_{A>0, r <= c_high} r A           positive-advantage tokens that carry gradient
    neg = sum_{A<0, c_low <= r <= c} r |A|     negative-advantage tokens that carry gradient
    while pos/neg < rho0/(1 - rho0): c_low += step_low (up to c_low_max); then the same for c_high
    l = dual-clip PPO with clip(r, c_low, c_high) and cap c = 3

Raising c_low drops more low-ratio negative tokens from the gradient (neg shrinks); raising c_high admits more
high-ratio positive tokens (pos grows): the "Entropy-Clip Rule" of the paper.

Reference: WooooDyy/BAPO `recipe/bapo/policy_loss.py::compute_policy_loss_bapo` (commit 7287044), defaults from
`recipe/bapo/config/bapo_trainer.yaml`. The reference restarts the search from the start bounds on every call
(every micro-batch), so the bounds are not state carried across steps: they are a pure function of the batch
here too (`adapt_bounds`), not a controller.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from workbench import ops, registry
from workbench.objectives.ppo import CLIP_LOGS, DUAL_CLIP_LOGS, check_inputs, clip_metrics, ppo_clip_per_token, ratio

BAPO_TITLE = ("BAPO: Stabilizing Off-Policy Reinforcement Learning for LLMs via Balanced Policy Optimization with "
              "Adaptive Clipping")


@dataclass(frozen=True)
class Bounds:
    """The bounds the search settled on and the positive share pos / (pos + neg) under them."""

    c_low: float
    c_high: float
    pos_share: float


def contributions(r, advantages, mask, c_low, c_high, *, dual_clip_c=3.0, reference_bug=False):
    """(pos, neg): detached scalar sums of r |A| over positive- and negative-advantage tokens [B, T] -> [].

    Default (our reading): only tokens whose loss carries gradient count; a positive token clipped above c_high, a
    negative one clipped below c_low or capped by the dual clip (r > c) adds nothing.
    reference_bug=True: the reference's effective ratio min(r, c_high) for A >= 0, max(r, c_low) for A < 0 over
    every valid token; there raising c_low makes neg *grow*, the opposite of the stated mechanism.
    """
    with torch.no_grad():
        if reference_bug:
            effective = torch.where(advantages >= 0, r.clamp(max=c_high), r.clamp(min=c_low))
            signed = effective * advantages * mask
        else:
            upper = float("inf") if dual_clip_c is None else dual_clip_c
            carries = ((advantages > 0) & (r <= c_high)) | ((advantages < 0) & (r >= c_low) & (r <= upper))
            signed = torch.where(carries, r * advantages, torch.zeros_like(r)) * mask
        return signed.clamp(min=0).sum(), (-signed.clamp(max=0)).sum()


def _pos_neg_ratio(pos, neg, eps) -> float:
    """pos / (neg + eps), inf when no negative token counts (the reference's convention)."""
    return float("inf") if float(neg) <= 0 else float(pos / (neg + eps))


def _share(pos, neg) -> float:
    total = float(pos + neg)
    return 1.0 if float(neg) <= 0 else float(pos) / total


def check_bounds(*, c_low=0.6, c_low_max=0.8, c_high=1.2, c_high_max=2.0, step_low=0.05, step_high=0.05, rho0=0.5,
                 eps=1e-8, dual_clip_c=3.0, **_) -> None:
    if not 0 < c_low <= c_low_max <= 1:
        raise ValueError(f"need 0 < c_low <= c_low_max <= 1, got c_low={c_low}, c_low_max={c_low_max}")
    if not 1 <= c_high <= c_high_max:
        raise ValueError(f"need 1 <= c_high <= c_high_max, got c_high={c_high}, c_high_max={c_high_max}")
    if step_low < 0 or step_high < 0:
        raise ValueError(f"step_low and step_high must be >= 0, got {step_low}, {step_high}")
    if not 0 <= rho0 < 1:
        raise ValueError(f"rho0 (target positive share) must be in [0, 1), got {rho0}")
    if not eps >= 0:
        raise ValueError(f"eps must be >= 0, got {eps}")
    if dual_clip_c is not None and not dual_clip_c > 1:
        raise ValueError(f"dual_clip_c must be > 1 (or None), got {dual_clip_c}")


def adapt_bounds(r, advantages, mask, *, c_low=0.6, c_low_max=0.8, c_high=1.2, c_high_max=2.0, step_low=0.05,
                 step_high=0.05, rho0=0.5, eps=1e-8, dual_clip_c=3.0, reference_bug=False, total=None) -> Bounds:
    """The reference's bound search on one batch (ratios r [B, T], detached). `total` sums (pos, neg) over the
    data-parallel ranks, as the reference all-reduces them (None: this batch is the whole step).

    Start at (c_low, c_high); while pos/(neg + eps) < rho0/(1 - rho0) (the reference's `adv_ratio_target`; 1 for
    rho0 = 0.5) raise c_low by step_low, capped at c_low_max; then, if still short, raise c_high by step_high up
    to c_high_max. Bounds only move up, stay within [start, max], and the search ends with the target met or both
    bounds at their maxima.
    """
    check_bounds(c_low=c_low, c_low_max=c_low_max, c_high=c_high, c_high_max=c_high_max, step_low=step_low,
                 step_high=step_high, rho0=rho0, eps=eps, dual_clip_c=dual_clip_c)
    target = rho0 / (1 - rho0)

    def measure(lo, hi):
        pos, neg = contributions(r, advantages, mask, lo, hi, dual_clip_c=dual_clip_c, reference_bug=reference_bug)
        return (pos, neg) if total is None else tuple(total(torch.stack([pos, neg])))

    pos, neg = measure(c_low, c_high)
    # the reference's loop order and increments (float accumulation included), lower bound first
    while _pos_neg_ratio(pos, neg, eps) < target and c_low < c_low_max and step_low > 0:
        c_low = min(c_low + step_low, c_low_max)
        pos, neg = measure(c_low, c_high)
    while _pos_neg_ratio(pos, neg, eps) < target and c_high < c_high_max and step_high > 0:
        c_high = min(c_high + step_high, c_high_max)
        pos, neg = measure(c_low, c_high)
    return Bounds(c_low, c_high, _share(pos, neg))


BAPO_LOGS = {
    "bapo/c_low": ("BAPO: lower ratio bound the per-minibatch search settled on (start 0.6, max 0.8).",
                   "0.6 to 0.8, averaged over minibatches (0.6 to 0.75 on the smoke runs). At 0.8 on every step: "
                   "negative tokens dominate even after the search; the balance rests on c_high alone."),
    "bapo/c_high": ("BAPO: upper ratio bound the per-minibatch search settled on (start 1.2, max 2.0).",
                    "1.2 to 2.0 (1.2 to 1.8 on notebook 10's run). Pinned at 2.0 with pos_share below 0.5: the "
                    "bounds cannot rebalance, negative tokens swamp the update (long wrong answers)."),
    "bapo/pos_share": ("BAPO: share pos / (pos + neg) of r |A| carried by positive-advantage tokens after the search.",
                       "At least rho0 = 0.5 unless both bounds hit their max (0.49 to 1.0 on the smoke run, 1.0 when "
                       "no negative token counts). Persistently below 0.5: negative-advantage tokens dominate the "
                       "gradient."),
}


@registry.objective(
    "bapo", title=BAPO_TITLE,
    summary="Dual-clip PPO with explicit ratio bounds raised per batch (c_low first, then c_high) until "
            "positive-advantage tokens carry the target share rho0 of the loss.",
    equation=r"\ell = \min\big(\max(-rA, -\mathrm{clip}(r, c_{low}, c_{high})A), -cA\,[A<0]\big),\ "
             r"c_{low}, c_{high} \uparrow \text{ until } \frac{\sum_{A>0} rA}{\sum_{A>0} rA + \sum_{A<0} r|A|} "
             r"\ge \rho_0", logs={**CLIP_LOGS, **DUAL_CLIP_LOGS, **BAPO_LOGS}, check=check_bounds)
def bapo(logp, old_logp, advantages, mask, *, agg="token-mean", denom=None, c_low=0.6, c_low_max=0.8, c_high=1.2,
         c_high_max=2.0, step_low=0.05, step_high=0.05, rho0=0.5, dual_clip_c=3.0, eps=1e-8, logr_clamp=None,
         reference_bug=False):
    r"""BAPO policy loss on one minibatch.

    Defaults: `recipe/bapo/config/bapo_trainer.yaml` (ratio_lower_start 0.6, ratio_lower_max 0.8, ratio_upper_start
    1.2, ratio_upper_max 2.0, steps 0.05, adv_ratio_target 1 i.e. rho0 = 0.5, eps 1e-8) and verl's clip_ratio_c
    3.0. The README/paper ranges are c_low in [0.6, 0.9], c_high in [1.2, 3.0]; the example script uses [0.8, 0.95],
    [1.2, 2.0] with step_high 0.1 and passes 0.5 as adv_ratio_target (pos/neg >= 0.5, i.e. rho0 = 1/3).

    Our reading (the catalog's "decide"): pos/neg count only tokens that carry gradient (`contributions`), so that
    raising c_low lowers neg as the paper's mechanism says; the reference's own counting is `reference_bug=True`.
    Where the catalog's dual-clip cap is active (A < 0, r > c) the token carries no gradient and is not counted
    either. The search restarts from (c_low, c_high) on every call, as in the reference (nothing carried across
    steps; a controller may still drive the start values). Under data parallelism pos and neg are summed over the
    ranks (`denom.total`), as the reference all-reduces them, so every rank searches the whole step. logr_clamp: the reference clamps log r to +-20.
    Metrics: `bapo/c_low`, `bapo/c_high`, `bapo/pos_share` (after the search), and PPO's clip fractions measured
    against the searched bounds.
    """
    check_bounds(c_low=c_low, c_low_max=c_low_max, c_high=c_high, c_high_max=c_high_max, step_low=step_low,
                 step_high=step_high, rho0=rho0, eps=eps, dual_clip_c=dual_clip_c)
    check_inputs(logp, old_logp, advantages, mask)
    old = old_logp.detach()
    r = ratio(logp, old, logr_clamp)
    bounds = adapt_bounds(r.detach(), advantages, mask, c_low=c_low, c_low_max=c_low_max, c_high=c_high,
                          c_high_max=c_high_max, step_low=step_low, step_high=step_high, rho0=rho0, eps=eps,
                          dual_clip_c=dual_clip_c, reference_bug=reference_bug,
                          total=None if denom is None else denom.total)
    eps_low, eps_high = 1 - bounds.c_low, bounds.c_high - 1  # ppo-clip's bounds are 1 -+ eps
    per_token, r, dual = ppo_clip_per_token(logp, old, advantages, eps_low=eps_low, eps_high=eps_high,
                                            dual_clip_c=dual_clip_c, logr_clamp=logr_clamp)
    loss = ops.aggregate(per_token, mask, agg, denom)
    metrics = clip_metrics(r.detach(), advantages, mask, eps_low, eps_high, dual)
    metrics.update({"bapo/c_low": bounds.c_low, "bapo/c_high": bounds.c_high, "bapo/pos_share": bounds.pos_share})
    return loss, metrics
