"""MiniRL: the IS-corrected token surrogate with a staleness mask (Zheng et al., arXiv 2512.01374).

    J_seq = E_{y~mu_old}[(pi_theta(y)/mu_old(y)) R]                   sequence-level objective
    J_tok = E_{y~mu_old}[sum_t (pi_theta(y_t)/mu_old(y_t)) R]          token surrogate (first order)
    with token ratios 1 + delta_t: prod_t(1 + delta_t) = 1 + sum_t delta_t + e_2(delta) + ...
    pi_theta/mu_old = (pi_old/mu_old) x (pi_theta/pi_old) = train-inference mismatch x policy staleness

    MiniRL (`unverified` exact form; catalog reading):
    J = E[(1/G) sum_i (1/|y_i|) sum_t M_it w_it A_i],  w = pi_theta/mu_old (gradient through pi_theta),
    A_i = R_i - mean_g R,
    M_it = 0 iff (A > 0 and pi_theta/pi_old > 1 + eps_high) or (A < 0 and pi_theta/pi_old < 1 - eps_low)

No reference implementation located. `minirl` is a recipe key in the catalog: these are plain functions.
"""
from __future__ import annotations

import torch

from workbench import ops, registry
from workbench.objectives.ppo import CLIP_LOGS, check_inputs, clip_metrics, ratio
from workbench.objectives.tis import MISMATCH_LOGS


def staleness_mask(logp, old_logp, advantages, *, eps_low, eps_high, logr_clamp=None) -> torch.Tensor:
    """Detached M [B, T] in {0, 1}: 0 only where pi_theta/pi_old is past the bound in A's direction."""
    with torch.no_grad():
        r = ratio(logp.detach(), old_logp.detach(), logr_clamp)
        past = ((advantages > 0) & (r > 1 + eps_high)) | ((advantages < 0) & (r < 1 - eps_low))
        return (~past).to(logp.dtype)


def minirl_loss(logp, old_logp, mu_logp, advantages, mask, *, eps_low=0.2, eps_high=0.2,
                agg="seq-mean-token-mean", denom=None, logr_clamp=None):
    """MiniRL loss: aggregate of l_t = -M_t w_t A_t, w = exp(logp - mu) with the gradient through logp.

    advantages: the group-centred A_i = R_i - mean_g R broadcast over the mask (e.g.
    `grpo(batch, scale="none")`). mu_logp: rollout-engine log-probs (mu_old); old_logp: trainer log-probs
    of the sampling policy (pi_old), used only by the mask M. Both are detached.
    Defaults: agg seq-mean-token-mean is the paper's (1/G) sum_i (1/|y_i|) sum_t; eps_low = eps_high = 0.2
    are placeholders (the paper's values are `unverified`). Gradient per token: -M w A ∇logp / (B |y_i|).
    mu = old = sg(logp) gives w = 1, M = 1: REINFORCE with the group-mean baseline.
    Masked tokens have zero loss and zero gradient and still count in the denominator.
    Metrics: PPO clip fractions of pi_theta/pi_old (`clip/high`, `clip/low`, ...), `minirl/masked_frac`,
    `minirl/w_mean` (mean w), `mismatch/abs_logp_diff_max` = max |old - mu| over valid tokens.
    """
    check_inputs(logp, old_logp, advantages, mask)
    if mu_logp.shape != logp.shape:
        raise ValueError(f"mu_logp has shape {tuple(mu_logp.shape)} but logp has shape {tuple(logp.shape)}")
    if eps_low < 0 or eps_high < 0:
        raise ValueError(f"eps_low and eps_high must be >= 0, got {eps_low}, {eps_high}")
    old, mu = old_logp.detach(), mu_logp.detach()
    keep = staleness_mask(logp, old, advantages, eps_low=eps_low, eps_high=eps_high, logr_clamp=logr_clamp)
    w = ratio(logp, mu, logr_clamp)
    loss = ops.aggregate(-keep * w * advantages, mask, agg, denom)
    with torch.no_grad():
        metrics = clip_metrics(ratio(logp.detach(), old, logr_clamp), advantages, mask, eps_low, eps_high)
        metrics["minirl/masked_frac"] = float(ops.masked_mean(1 - keep, mask))
        metrics["minirl/w_mean"] = float(ops.masked_mean(w, mask))
        metrics["mismatch/abs_logp_diff_max"] = float(((old - mu).abs() * mask).max())
    return loss, metrics


def first_order_gap(log_ratios, mask) -> torch.Tensor:
    """[B]: prod_t r_t - (1 + sum_t (r_t - 1)) over valid tokens, with r_t = exp(log_ratios).

    The error of the token surrogate's first-order approximation of the sequence IS weight. To second
    order it is e_2(delta) = sum_{s<t} delta_s delta_t = ((sum delta)^2 - sum delta^2)/2: of size
    T delta^2 (RMS) for independent zero-mean delta_t, up to T^2 delta^2 / 2 when all delta_t share a sign.
    """
    ops.check_mask(log_ratios, mask, "log_ratios")
    seq = torch.exp(ops.masked_sum(log_ratios, mask, -1))
    return seq - 1 - ops.masked_sum(torch.expm1(log_ratios), mask, -1)


MINIRL_LOGS = {
    "minirl/w_mean": ("MiniRL: mean IS weight pi_theta / mu_old.",
                      "Within a few hundredths of 1 (pi_theta/mu is 1 on-policy with HF generate). Far from 1: "
                      "staleness (see clip/region) or engine mismatch (see mismatch/is_ratio_mean)."),
    "minirl/masked_frac": ("MiniRL: fraction of tokens masked for staleness past the clip bound.",
                           "Equal to clip/region (the same band test on pi_theta/pi_old): 0 on the first minibatch "
                           "after a rollout, a few percent at most. Tens of percent: the step is too large for eps."),
}


@registry.objective(
    "minirl", title="Stabilizing Reinforcement Learning with LLMs: Formulation and Practices",
    summary="Token IS weight pi_theta / mu_old on REINFORCE, with tokens masked once pi_theta / pi_old leaves "
            "the clip band in the direction of A.",
    equation=r"\ell_{i,t} = -M_{i,t}\,\frac{\pi_\theta(y_{i,t})}{\mu_{old}(y_{i,t})}\,\hat A_i",
    reads=("mu_logp",), logs={**CLIP_LOGS, **MISMATCH_LOGS, **MINIRL_LOGS})
def minirl(logp, old_logp, advantages, mask, *, mu_logp, agg="seq-mean-token-mean", denom=None, eps_low=0.2,
           eps_high=0.2, logr_clamp=None):
    """`minirl_loss` in the policy-objective signature; `mu_logp` [B, T] is the rollout engine's log-prob."""
    return minirl_loss(logp, old_logp, mu_logp, advantages, mask, eps_low=eps_low, eps_high=eps_high, agg=agg,
                       denom=denom, logr_clamp=logr_clamp)
