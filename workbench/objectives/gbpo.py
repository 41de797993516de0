"""GBPO: regress the token ratio to an analytic target ratio instead of clipping it.

    r    = exp(logp - old)
    rho* = 1 - eps_low + (eps_low + eps_high) sigma(target_adv)      in [1 - eps_low, 1 + eps_high]
    l    = |r - rho*| |A|                                            (A, target_adv detached)

`target_adv` (the advantage `gbpo`, median-centred) decides where the ratio should go; |A| (the GRPO z-score) only
weighs how hard. The gradient is sign(r - rho*) |A| grad r: zero exactly where r = rho*, and it pulls r back from
either side, so ratios past the band are pushed back instead of merely losing their gradient.

Reference: bounded-ratio-rl/bounded_ratio_rl `src/verl/trainer/ppo/core_algos.py::compute_policy_loss_gbpo`
(commit 64ff1cd).
"""
from __future__ import annotations

import torch

from workbench import ops, registry
from workbench.objectives.ppo import CLIP_LOGS, check_inputs, clip_metrics, ratio

GBPO_TITLE = "Bounded Ratio Reinforcement Learning"
KEPT_METRICS = ("clip/out_of_band", "kl/k1_old", "kl/k3_old", "ratio/mean", "ratio/max")  # no clip branch here


def check_bounds(*, eps_low=0.2, eps_high=0.2, **_) -> None:
    if not 0 <= eps_low < 1 or not eps_high >= 0:
        raise ValueError(f"need 0 <= eps_low < 1 and eps_high >= 0, got eps_low={eps_low}, eps_high={eps_high}")


def target_ratio(target_adv: torch.Tensor, *, eps_low=0.2, eps_high=0.2) -> torch.Tensor:
    """rho* = 1 - eps_low + (eps_low + eps_high) sigmoid(target_adv), detached, in [1 - eps_low, 1 + eps_high]."""
    check_bounds(eps_low=eps_low, eps_high=eps_high)
    rho = 1.0 - eps_low + (eps_high + eps_low) * torch.sigmoid(target_adv.detach())
    return rho.clamp(1.0 - eps_low, 1.0 + eps_high)  # a no-op but for rounding: 0.8 + 0.4 * 1 is 1.2 + 1 ulp


GBPO_LOGS = {
    "gbpo/target_ratio_mean": ("GBPO: mean target ratio rho* = 1 - eps_low + (eps_low + eps_high) sigma(target_adv).",
                               "Within [1 - eps_low, 1 + eps_high], near 1 (1.00 to 1.03 on the smoke run). Far from "
                               "1 for long: groups split unevenly at the median, the policy is pushed one way."),
    "gbpo/abs_gap": ("GBPO: mean |r - rho*|, how far token ratios are from their targets (the L1 loss before |A|).",
                     "About |1 - rho*| on the first minibatch (r = 1), shrinking as ratios reach their targets (0.03 "
                     "to 0.15 on the smoke run). Growing across steps: ratios overshoot (lower the learning rate)."),
}


@registry.objective(
    "gbpo", title=GBPO_TITLE,
    summary="L1 regression of the token ratio to a target ratio 1 - eps_low + (eps_low + eps_high) sigma(target_adv) "
            "set by the reward's side of the group median, weighted by |A|.",
    equation=r"\ell = |r - \rho^*|\,|A|,\quad \rho^* = 1 - \epsilon_{low} + (\epsilon_{low} + \epsilon_{high})\,"
             r"\sigma(\hat A),\quad \hat A = \frac{R - \mathrm{median}_g R}{T(\mathrm{std}_g R + \epsilon)}",
    reads=("target_adv",), logs={**{k: CLIP_LOGS[k] for k in KEPT_METRICS}, **GBPO_LOGS}, check=check_bounds)
def gbpo(logp, old_logp, advantages, mask, *, target_adv, agg="token-mean", denom=None, eps_low=0.2, eps_high=0.2,
         logr_clamp=None):
    """GBPO policy loss. `target_adv` [B, T] comes from the advantage `gbpo` (batch.target_adv).

    Defaults: eps_low = eps_high = 0.2 (verl's clip_ratio in the reference's ppo_trainer.yaml; its README suggests
    0.3 / 0.3). logr_clamp: the reference clamps log r to +-20 (None here, as `ppo-clip`). Metrics: the share of
    tokens outside [1 - eps_low, 1 + eps_high] (`clip/out_of_band`, the reference's pg_clipfrac), drift and ratio
    statistics, `gbpo/target_ratio_mean` and `gbpo/abs_gap` (mean |r - rho*|).
    """
    check_inputs(logp, old_logp, advantages, mask)
    if target_adv is None or target_adv.shape != logp.shape:
        got = None if target_adv is None else tuple(target_adv.shape)
        raise ValueError(f"target_adv must be a tensor of logp's shape {tuple(logp.shape)} (the advantage 'gbpo' "
                         f"fills batch.target_adv), got {got}")
    rho = target_ratio(target_adv, eps_low=eps_low, eps_high=eps_high)  # [B, T]
    r = ratio(logp, old_logp.detach(), logr_clamp)
    gap = r - rho
    loss = ops.aggregate(gap.abs() * advantages.detach().abs(), mask, agg, denom)
    all_metrics = clip_metrics(r.detach(), advantages, mask, eps_low, eps_high)
    metrics = {k: all_metrics[k] for k in KEPT_METRICS}
    with torch.no_grad():
        metrics["gbpo/target_ratio_mean"] = float(ops.masked_mean(rho, mask))
        metrics["gbpo/abs_gap"] = float(ops.masked_mean(gap.abs(), mask))
    return loss, metrics
