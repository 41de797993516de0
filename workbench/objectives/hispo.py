"""HiSPO: hierarchical (sequence, then token) importance-sampling masks on the PPO-clip surrogate.

    log g_i   = sum_t m (old - mu) / |y_i|                      train-inference mismatch, geometric mean
    M_i       = [|log g_i| <= delta_seq]                        sequence mask
    rho_t     = pi_theta / mu = r_t exp(old_t - mu_t)           total ratio (staleness x mismatch)
    M_{i,t}   = [1 - mask_eps_low <= rho_t <= 1 + mask_eps_high] token mask
    l_t       = M_i M_{i,t} l_t^{PPO-clip}(r_t)                 masked tokens: zero loss, zero gradient
"""
from __future__ import annotations

import math

import torch

from workbench import ops, registry
from workbench.objectives.dispo import check_bounds
from workbench.objectives.ppo import CLIP_LOGS, DUAL_CLIP_LOGS, check_inputs, ppo_clip, ratio
from workbench.objectives.sequence import sequence_log_ratio
from workbench.objectives.tis import MISMATCH_LOGS, with_weights


def sequence_mask(old_logp, mu_logp, mask, *, delta_seq) -> torch.Tensor:
    """M_i [B] bool: the sequence's geometric-mean mismatch pi_old / mu is within exp(+-delta_seq)."""
    with torch.no_grad():
        return sequence_log_ratio(old_logp.detach(), mu_logp.detach(), mask).abs() <= delta_seq


def token_mask(logp, mu_logp, *, mask_eps_low, mask_eps_high, logr_clamp=None) -> torch.Tensor:
    """M_{i,t} [B, T] bool: the total ratio pi_theta / mu is inside [1 - mask_eps_low, 1 + mask_eps_high]."""
    with torch.no_grad():
        rho = ratio(logp.detach(), mu_logp.detach(), logr_clamp)  # = r exp(old - mu)
        return (rho >= 1 - mask_eps_low) & (rho <= 1 + mask_eps_high)


HISPO_LOGS = {
    "hispo/seq_masked_frac": ("HiSPO: share of sequences whose geometric-mean mismatch pi_old/mu leaves "
                              "exp(+-delta_seq): the whole sequence gets no gradient.",
                              "0 with HF generate (mu equals old up to rounding). Above a few percent: the rollout "
                              "engine disagrees with the trainer on whole trajectories (vLLM, MoE routing, stale "
                              "weights); those samples are discarded."),
    "hispo/token_masked_frac": ("HiSPO: share of valid tokens whose total ratio pi_theta/mu leaves the token band.",
                                "0 on the first minibatch with HF generate, a few percent with several minibatches. "
                                "Tens of percent: staleness or mismatch moved most tokens out of the band."),
}


@registry.objective(
    "hispo", title="LongCat-Flash-Prover: Advancing Native Formal Reasoning via Agentic Tool-Integrated Reinforcement "
                   "Learning",
    summary="PPO-clip with two gradient masks: whole sequences whose geometric-mean engine mismatch pi_old/mu leaves "
            "exp(+-delta), then tokens whose total ratio pi_theta/mu leaves [1 - eps, 1 + eps].",
    equation=r"\ell_{i,t} = M_i M_{i,t}\,\ell^{\mathrm{PPO}}_{i,t},\ "
             r"M_i = \Big[\Big|\tfrac{1}{|y_i|}\sum_t(\log\pi_{old} - \log\mu)\Big| \le \delta\Big],\ "
             r"M_{i,t} = \Big[\tfrac{\pi_\theta}{\mu}(y_{i,t}) \in [1-\epsilon_l, 1+\epsilon_h]\Big]",
    reads=("mu_logp",), logs={**CLIP_LOGS, **DUAL_CLIP_LOGS, **MISMATCH_LOGS, **HISPO_LOGS})
def hispo(logp, old_logp, advantages, mask, *, mu_logp, agg="token-mean", denom=None, delta_seq=math.log(2),
          mask_eps_low=0.2, mask_eps_high=0.28, eps_low=0.2, eps_high=0.28, dual_clip_c=None, logr_clamp=None):
    r"""HiSPO (Hierarchical Importance Sampling Policy Optimization, LongCat-Flash-Prover report, arXiv 2603.21065).
    No reference implementation located; the abstract says it "employs a gradient masking strategy that accounts
    for the policy staleness and the inherent train-inference engine discrepancies at both sequence and token
    levels" for MoE training on long-horizon tasks. The report's formulas could not be read here (`abstract-only`).

    Our reading (the catalog's): which ratio each level tests, and why:
      - sequence level: the engine mismatch pi_old / mu only (the sequence was sampled by mu; a whole trajectory
        whose engine log-probs disagree with the trainer's on average, e.g. a different MoE routing, is not
        trusted at all). Length-normalized (geometric mean, as GSPO's sequence ratio, `sequence_log_ratio`), so a
        long trajectory is not masked for its length alone; two-sided |log g_i| <= delta_seq.
      - token level: the total ratio pi_theta / mu = (pi_theta / pi_old)(pi_old / mu), staleness and mismatch
        together, two-sided: a token is dropped once the policy has moved too far from the behaviour that
        sampled it, whichever of the two moved it.
      - inside both masks the loss is the plain PPO-clip term on pi_theta / pi_old (no IS weight: the abstract
        describes masking only).
    Defaults: delta_seq = log 2 (|log g| <= log 2: the average token ratio within [1/2, 2]); mask bounds and the PPO
    clip 0.2 / 0.28 (DAPO's clip-higher); all `unverified`; dual_clip_c and logr_clamp off, as `ppo-clip`.
    With mu = old and the first minibatch (r = 1) nothing is masked; with delta_seq, mask_eps_* = inf this is
    exactly `ppo-clip`. Masked tokens still count in the aggregation denominator (as TIS's mask modes).
    Metrics: PPO clip fractions on pi_theta / pi_old, `hispo/seq_masked_frac` (share of sequences failing the
    sequence check), `hispo/token_masked_frac` (share of valid tokens failing the token check),
    `mismatch/abs_logp_diff_max` (max |old - mu|).
    """
    check_bounds(delta_seq=delta_seq, mask_eps_low=mask_eps_low, mask_eps_high=mask_eps_high,
                      eps_low=eps_low, eps_high=eps_high)
    check_inputs(logp, old_logp, advantages, mask)
    if mu_logp.shape != logp.shape:
        raise ValueError(f"mu_logp has shape {tuple(mu_logp.shape)} but logp has shape {tuple(logp.shape)}")
    old, mu = old_logp.detach(), mu_logp.detach()
    keep_seq = sequence_mask(old, mu, mask, delta_seq=delta_seq)  # [B]
    keep_tok = token_mask(logp, mu, mask_eps_low=mask_eps_low, mask_eps_high=mask_eps_high,
                          logr_clamp=logr_clamp)  # [B, T]
    keep = (keep_seq[:, None] & keep_tok).to(logp.dtype)
    loss, metrics = ppo_clip(logp, old, advantages, mask, agg=agg, denom=with_weights(denom, mask, keep),
                             eps_low=eps_low, eps_high=eps_high, dual_clip_c=dual_clip_c, logr_clamp=logr_clamp)
    with torch.no_grad():
        rows = (mask.sum(-1) > 0).to(mask.dtype)
        metrics["hispo/seq_masked_frac"] = float(ops.masked_mean((~keep_seq).to(mask.dtype), rows))
        metrics["hispo/token_masked_frac"] = float(ops.masked_mean((~keep_tok).to(mask.dtype), mask))
        metrics["mismatch/abs_logp_diff_max"] = float(((old - mu).abs() * mask).max())
    return loss, metrics
