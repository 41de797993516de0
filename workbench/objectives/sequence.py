"""Sequence-level ratios: GSPO (length-normalized sequence ratio), GMPO (`geo_mean`) and LUSPO.

    log s_i = sum_t m (logp - old) / max(|y_i|, 1)                 GSPO sequence ratio (geometric mean)
    token form: log s_it = sg(log s_i) + logp_t - sg(logp_t)        same value, gradient s_i A ∇logp_t
    l_i = -min(s_i A_i, clip(s_i, 1 - eps_low, 1 + eps_high) A_i)
    gspo:  L = (1/B) sum_i l_i                                      (aggregation fixed: seq-mean-token-mean)
    luspo: L = (1/B) sum_i |y_i| l_i                                (TRL loss_type="luspo")
    geo_mean: rho_t = sgn(A) min(sgn(A) logr_t, sgn(A) clamp(logr_t, -eps_low, eps_high)),
              S_i = exp(sum_t m rho_t / |y_i|),  L = (1/B) sum_i -S_i mean_t(A_it)
"""
from __future__ import annotations

import math

import torch

from workbench import ops, registry
from workbench.objectives.ppo import CLIP_LOGS, check_inputs, clip_metrics, ratio


def _require_agg(key: str, agg: str, required: str, why: str) -> None:
    if agg != required:
        raise ValueError(f"{key} aggregates with {required!r} only, got agg={agg!r}: {why}")


def sequence_log_ratio(logp, old_logp, mask, logr_clamp=None) -> torch.Tensor:
    """log s_i = sum_t m (logp - old) / max(|y_i|, 1), shape [B]; optionally clamped to +-logr_clamp."""
    log_s = ops.masked_sum(logp - old_logp, mask, -1) / mask.sum(-1).clamp(min=1)
    return log_s if logr_clamp is None else log_s.clamp(-logr_clamp, logr_clamp)


IS_LEVELS = ("token", "sequence")


def importance_ratio(logp, old_logp, mask, level="token", logr_clamp=None) -> torch.Tensor:
    """TRL's `importance_sampling_level`: the token ratio r_t [B, T], or the length-normalized sequence ratio
    s_i [B, 1] (differentiable: its gradient spreads over the sequence's tokens)."""
    if level == "token":
        return ratio(logp, old_logp, logr_clamp)
    if level == "sequence":
        return torch.exp(sequence_log_ratio(logp, old_logp, mask, logr_clamp))[:, None]
    raise ValueError(f"unknown importance sampling level {level!r}; choose one of {IS_LEVELS}")


def ratio_metrics(r, advantages, mask, eps_low, eps_high) -> dict[str, float]:
    """Clip metrics of a token ratio [B, T], or over sequences for a sequence ratio [B, 1]."""
    if r.shape[-1] == 1 and mask.shape[-1] != 1:
        return sequence_metrics(r[:, 0], advantages, mask, eps_low, eps_high)
    return clip_metrics(r, advantages, mask, eps_low, eps_high)


def gspo_per_token(logp, old_logp, advantages, mask, *, eps_low, eps_high, logr_clamp=None, upper_clamp_only=False):
    """GSPO-token per-token loss [B, T] and the sequence ratio s_i [B] (detached).

    log s_it = sg(log s_i) + logp_t - sg(logp_t): every valid token carries the value s_i, and the
    gradient of -s_it A_it is -s_i A_it ∇logp_t (zero on the whole sequence when it is clipped).
    logr_clamp clamps log s_it to +-logr_clamp, or only from above with `upper_clamp_only` (verl clamps
    the token form at max 10 and not below); a clamped sequence gets no gradient.
    """
    low = None if logr_clamp is None or upper_clamp_only else -logr_clamp
    log_s = sequence_log_ratio(logp.detach(), old_logp.detach(), mask)
    log_s_tok = log_s[:, None] + logp - logp.detach()
    if logr_clamp is not None:
        log_s_tok = log_s_tok.clamp(low, logr_clamp)
    s_tok = torch.exp(log_s_tok)
    unclipped = -advantages * s_tok
    clipped = -advantages * s_tok.clamp(1 - eps_low, 1 + eps_high)
    s_seq = torch.exp(log_s if logr_clamp is None else log_s.clamp(low, logr_clamp))
    return torch.maximum(unclipped, clipped), s_seq


def sequence_metrics(s_seq, advantages, mask, eps_low, eps_high) -> dict[str, float]:
    """Clip fractions over sequences, with the sequence ratio s_i and the sequence-mean advantage. TRL's
    sequence-level convention (`global_masked_mean` of a [B, 1] tensor): every row counts in the denominator,
    empty completions included (their mean advantage is 0, so they are never clipped)."""
    seq_mask = torch.ones_like(mask[:, :1])
    a_seq = ops.masked_mean(advantages.detach(), mask, -1)[:, None]
    return clip_metrics(s_seq.detach()[:, None], a_seq, seq_mask, eps_low, eps_high)


def sequence_ratio_loss(logp, old_logp, advantages, mask, agg, denom, eps_low, eps_high, logr_clamp,
                        upper_clamp_only=False):
    """GSPO's token-form loss aggregated with `agg`, and its sequence-level clip metrics (GSPO, LUSPO)."""
    check_inputs(logp, old_logp, advantages, mask)
    per_token, s_seq = gspo_per_token(logp, old_logp, advantages, mask, eps_low=eps_low, eps_high=eps_high,
                                      logr_clamp=logr_clamp, upper_clamp_only=upper_clamp_only)
    return ops.aggregate(per_token, mask, agg, denom), sequence_metrics(s_seq, advantages, mask, eps_low, eps_high)


@registry.objective(
    "gspo", title="Group Sequence Policy Optimization",
    summary="PPO-clip on the length-normalized sequence ratio s_i (token form); seq-mean-token-mean by default "
            "(TRL), any aggregation (verl's actor default is token-mean).",
    equation=r"\ell_i = -\min\big(s_iA_i,\ \mathrm{clip}(s_i, 1-\epsilon_{low}, 1+\epsilon_{high})A_i\big),\ "
             r"s_i = \exp\Big(\tfrac{1}{|y_i|}\sum_t m_{i,t}(\log\pi_\theta - \log\pi_{old})\Big)", logs=CLIP_LOGS)
def gspo(logp, old_logp, advantages, mask, *, agg="seq-mean-token-mean", denom=None, eps_low=3e-4,
         eps_high=4e-4, logr_clamp=None, upper_clamp_only=False):
    r"""GSPO, computed in the token form (verl `gspo`, TRL `gspo_token`).

        log s_i  = sum_t m (logp - old) / max(|y_i|, 1)
        log s_it = sg(log s_i) + logp_t - sg(logp_t)
        l_it     = -min(s_it A_it, clip(s_it, 1 - eps_low, 1 + eps_high) A_it)
        L        = (1/B) sum_i (1/|y_i|) sum_t m l_it  = (1/B) sum_i l_i

    Per token the gradient is s_i A_i ∇logp_t, so under seq-mean-token-mean the gradient equals that of
    the sequence form -min(s_i A_i, clip(s_i) A_i) with s_i differentiated directly (TRL
    `importance_sampling_level="sequence"`, OpenRLHF `gspo`): the paper's loss, the default. Any other
    aggregation is accepted because the anchors use one: verl's actor default `loss_agg_mode` is token-mean,
    which weights every sequence by its length (trl#3823); `denom` passes through.
    Defaults eps_low = 3e-4, eps_high = 4e-4 (TRL example script); logr_clamp=None (TRL). verl clamps the
    token-form log-ratio at max 10 and not below: logr_clamp=10, upper_clamp_only=True.
    With per-token advantages the token form uses A_it.
    Metrics: clip fractions over sequences on s_i with the sequence-mean advantage.
    """
    return sequence_ratio_loss(logp, old_logp, advantages, mask, agg, denom, eps_low, eps_high, logr_clamp,
                               upper_clamp_only)


@registry.objective(
    "luspo",
    title="Length-Unbiased Sequence Policy Optimization: Revealing and Controlling Response Length "
          "Variation in RLVR",
    summary="GSPO's per-sequence loss scaled by the response length |y_i|, averaged over sequences.",
    equation=r"L = \frac{1}{B}\sum_i |y_i|\,\ell_i^{\mathrm{GSPO}}", logs=CLIP_LOGS)
def luspo(logp, old_logp, advantages, mask, *, agg="seq-mean-token-sum", denom=None, eps_low=3e-4,
          eps_high=4e-4, logr_clamp=None):
    r"""LUSPO in TRL's form (`loss_type="luspo"` with sequence-level IS): L = mean_i(|y_i| l_i).

    l_i is GSPO's per-sequence loss. In the token form every valid token carries l_i, so
    |y_i| l_i = sum_t m l_it and L is exactly the `seq-mean-token-sum` aggregation of GSPO's token-form
    loss; `agg` must therefore be "seq-mean-token-sum" (a ValueError otherwise), `denom` passes through.
    The per-sequence gradient is |y_i| times GSPO's. B counts sequences with at least one valid token
    (TRL's `.mean()` also counts empty rows); the paper's batch constant is secondary, TRL is the reference.
    Defaults as `gspo`.
    """
    _require_agg("luspo", agg, "seq-mean-token-sum",
                 "LUSPO's loss (1/B) sum_i |y_i| l_i is the seq-mean-token-sum of GSPO's token-form loss")
    return sequence_ratio_loss(logp, old_logp, advantages, mask, agg, denom, eps_low, eps_high, logr_clamp)


GEO_MEAN_LOGS = {
    "geo/seq_ratio_mean": ("GMPO: mean geometric-mean sequence ratio of the log-space-clipped token ratios.",
                           "1 on the first minibatch after a rollout, within about 1% of 1 after. A steady drift: "
                           "each batch moves whole sequences far (the log-space clip binds only in A's direction)."),
}


@registry.objective(
    "geo_mean", title="Geometric-Mean Policy Optimization",
    summary="GMPO: geometric mean of token ratios clipped in log space toward the advantage; one loss per "
            "sequence.",
    equation=r"\tilde\rho_t = \mathrm{sgn}(A)\min\big(\mathrm{sgn}(A)\log r_t,\ \mathrm{sgn}(A)\,"
             r"\mathrm{clip}(\log r_t, -\epsilon_{low}, \epsilon_{high})\big),\ "
             r"\ell_i = -\bar A_i \exp\Big(\tfrac{1}{|y_i|}\sum_t m_{i,t}\tilde\rho_t\Big)",
    logs={**CLIP_LOGS, **GEO_MEAN_LOGS})
def geo_mean(logp, old_logp, advantages, mask, *, agg="seq-mean-token-mean", denom=None, eps_low=0.4,
             eps_high=0.4, logr_clamp=None):
    r"""GMPO (verl `geo_mean`).

        logr_t = logp - old (clamped to +-logr_clamp if given; verl leaves its clamp commented out)
        rho_t  = sgn(A) min(sgn(A) logr_t, sgn(A) clamp(logr_t, -eps_low, eps_high))
        S_i    = exp(sum_t m rho_t / |y_i|),   A_bar_i = mean_t(m A_it)
        l_i    = -S_i A_bar_i,                 L = (1/B) sum_i l_i

    The clip is in log space and one-sided in the direction of the advantage: A>0 tokens with
    logr > eps_high and A<0 tokens with logr < -eps_low get zero gradient. The loss is per sequence, so the
    only aggregation is the mean over sequences: `agg` must be "seq-mean-token-mean" (the per-sequence
    loss broadcast over its tokens, which returns exactly (1/B) sum_i l_i; B counts non-empty sequences
    or `denom.num_seqs`; verl's `torch.mean` also counts empty rows).
    Defaults eps_low = eps_high = 0.4: the log-space range (-0.4, 0.4) is `unverified` (paper recollection).
    Metrics: token-level clip fractions in log space (r > e^eps_high, r < e^-eps_low) and the mean S_i.
    """
    _require_agg("geo_mean", agg, "seq-mean-token-mean",
                 "GMPO has one loss per sequence, -S_i A_bar_i, averaged over sequences")
    check_inputs(logp, old_logp, advantages, mask)
    if eps_low < 0 or eps_high < 0:
        raise ValueError(f"eps_low and eps_high must be >= 0, got {eps_low}, {eps_high}")
    logr = logp - old_logp
    if logr_clamp is not None:
        logr = logr.clamp(-logr_clamp, logr_clamp)
    sgn = torch.sign(advantages)
    rho = sgn * torch.minimum(sgn * logr, sgn * logr.clamp(-eps_low, eps_high))
    S = torch.exp(ops.masked_sum(rho, mask, -1) / mask.sum(-1).clamp(min=1))
    a_bar = ops.masked_mean(advantages, mask, -1)
    per_seq = -S * a_bar
    loss = ops.aggregate(per_seq[:, None].expand_as(logp), mask, agg, denom)
    metrics = clip_metrics(torch.exp(logr.detach()), advantages, mask, -math.expm1(-eps_low), math.expm1(eps_high))
    seq_mask = (mask.sum(-1) > 0).to(mask.dtype)
    metrics["geo/seq_ratio_mean"] = float(ops.masked_mean(S.detach(), seq_mask))
    return loss, metrics
