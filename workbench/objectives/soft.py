"""SAPO: a smooth sigmoid gate on the ratio in place of PPO's hard clip.

    f_tau(r) = (4 / tau) sigmoid(tau (r - 1))         df/dr = 4 s (1 - s), s = sigmoid(tau (r - 1)); = 1 at r = 1
    l = -f_tau(r) A,   tau = tau_pos if A > 0 else tau_neg
"""
from __future__ import annotations

import torch

from workbench import ops, registry
from workbench.objectives.ppo import CLIP_LOGS, check_inputs
from workbench.objectives.sequence import IS_LEVELS, importance_ratio, ratio_metrics


def check_sapo(*, tau_pos=1.0, tau_neg=1.05, **_) -> None:
    if tau_pos <= 0 or tau_neg <= 0:
        raise ValueError(f"tau_pos and tau_neg must be > 0, got {tau_pos}, {tau_neg}")


def sapo_gate(r: torch.Tensor, tau: float) -> torch.Tensor:
    """f_tau(r) = (4 / tau) sigmoid(tau (r - 1)) (verl `gate_function`)."""
    return torch.sigmoid(tau * (r - 1.0)) * (4.0 / tau)


SAPO_LOGS = {
    "sapo/gate_weight": ("SAPO: mean soft-gate derivative 4 s(1 - s), 1 on-policy, smaller where PPO would clip.",
                         "Just below 1 (0.998 on the smoke run): 4 s(1 - s) is 0.99 at r = 1.2 and 0.79 at r = 2 "
                         "with tau = 1. Well below 1: ratios far from 1, and the soft gate damps most tokens."),
    "sapo/gate_value": ("SAPO: mean gate value f_tau(r) = (4/tau) sigmoid(tau (r - 1)); 2/tau on-policy (2 where A > "
                        "0, 1.90 where A <= 0 with the default taus).",
                        "About 2/tau on-policy: between 1.90 (A <= 0, tau_neg = 1.05) and 2 (A > 0, tau_pos = 1); "
                        "1.92 on the smoke run. Leaving that band: the ratios have moved far from 1."),
}


@registry.objective(
    "sapo", title="Soft Adaptive Policy Optimization",
    summary="Soft temperature gate f_tau(r) = (4/tau) sigmoid(tau (r-1)) replaces hard clipping; "
            "tau_pos for A>0, tau_neg for A<0.",
    equation=r"\ell_{i,t} = -\frac{4}{\tau}\,\sigma\big(\tau(r_{i,t}-1)\big)A_i,\quad "
             r"\tau = \tau_{pos}\ (A>0),\ \tau_{neg}\ (A\le 0)",
    logs={**{k: v for k, v in CLIP_LOGS.items() if not k.startswith("clip/")}, **SAPO_LOGS},
    choices={"level": IS_LEVELS}, check=check_sapo)
def sapo(logp, old_logp, advantages, mask, *, agg="seq-mean-token-mean", denom=None, tau_pos=1.0, tau_neg=1.05,
         logr_clamp=20.0, level="token"):
    r"""SAPO (verl `compute_policy_loss_sapo`, TRL `loss_type="sapo"`, rlhf-book `SAPOLoss`).

        r = exp(clamp(logp - old, -20, 20)),   l = -f_tau(r) A,   f_tau(r) = (4/tau) sigma(tau (r - 1))

    The gradient w.r.t. logp is -A r 4 sigma (1 - sigma): -A at r = 1 (on-policy REINFORCE), decaying
    smoothly to 0 as |r - 1| grows; as tau -> 0, f_tau(r) - f_tau(1) -> r - 1 (unclipped surrogate).
    tau_neg applies where A <= 0 (A = 0 contributes nothing). Defaults tau_pos = 1.0, tau_neg = 1.05,
    logr_clamp = 20 (verl). Default aggregation seq-mean-token-mean (verl forces it); any mode is accepted
    (TRL uses its `grpo` normalization, i.e. the same mode).
    `level="sequence"` (TRL `importance_sampling_level="sequence"`): the gate acts on the length-normalized
    sequence ratio s_i, shared by the sequence's tokens (its gradient spreads over them).
    Metrics: no hard clip, so no clip fractions; `sapo/gate_weight` = mean 4 sigma (1 - sigma) (the factor
    that replaces PPO's 0/1 clip indicator, 1 on-policy), `sapo/gate_value` = mean f_tau(r), plus the
    ratio and KL-to-old statistics.
    """
    check_sapo(tau_pos=tau_pos, tau_neg=tau_neg)
    check_inputs(logp, old_logp, advantages, mask)
    r = importance_ratio(logp, old_logp, mask, level, logr_clamp)  # [B, T], or [B, 1] per sequence
    positive = advantages > 0
    gate = torch.where(positive, sapo_gate(r, tau_pos), sapo_gate(r, tau_neg))
    loss = ops.aggregate(-gate * advantages, mask, agg, denom)
    with torch.no_grad():
        rd = r.detach().expand_as(mask)
        s = torch.where(positive, torch.sigmoid(tau_pos * (rd - 1)), torch.sigmoid(tau_neg * (rd - 1)))
        inf = float("inf")
        metrics = {k: v for k, v in ratio_metrics(r.detach(), advantages, mask, inf, inf).items()
                   if not k.startswith("clip/")}
        metrics["sapo/gate_weight"] = float(ops.masked_mean(4 * s * (1 - s), mask))
        metrics["sapo/gate_value"] = float(ops.masked_mean(gate.detach(), mask))
    return loss, metrics
