"""KTO: prospect-theoretic loss on UNPAIRED desirable / undesirable completions (TRL `KTOTrainer`, loss_type="kto").

Inputs (keywords; summed sequence log-probs as everywhere in F7):
    logp, ref_logp   [B]   policy / reference log-prob of each completion
    label            [B]   bool, True = desirable
    kl_logp, kl_ref_logp [M] policy / reference log-probs of MISMATCHED prompt/completion pairs (TRL pairs each
                           prompt with another example's completion) for the KL baseline z_ref
The paired positional form `kto(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp)` is accepted too:
the chosen completions are desirable and the rejected ones undesirable (the same as passing them concatenated).
"""
from __future__ import annotations

import warnings

import torch

from workbench import registry
from workbench.kl import KL_LOGS
from workbench.preference.base import TRL_LOGS, check_beta, check_pairs, preference_metrics


def kto_baseline(kl_logp, kl_ref_logp) -> torch.Tensor:
    """z_ref = clamp(mean(kl_logp − kl_ref_logp), min=0), detached (TRL: detach, gather over ranks, mean, clamp)."""
    check_pairs(kl_logp, kl_ref_logp, names=("kl_logp", "kl_ref_logp"))
    with torch.no_grad():
        return (kl_logp.detach() - kl_ref_logp.detach()).mean().clamp(min=0)


def kto_weight_ranges(num_desirable: int, num_undesirable: int, desirable_weight: float = 1.0,
                      undesirable_weight: float = 1.0) -> dict:
    """KTO paper eq. (8): λ_D·n_D / (λ_U·n_U) ∈ [1, 4/3]. Returns TRL's recommended ranges for either weight
    (holding the other fixed, rounded to 2 decimals as TRL does) and whether the given weights fall in one;
    warns like TRL's `KTOTrainer` when the classes are imbalanced and neither weight is in range."""
    n_d, n_u = max(int(num_desirable), 1), max(int(num_undesirable), 1)
    des = (round(n_u * undesirable_weight / n_d, 2), round(n_u * undesirable_weight / n_d * 1.33, 2))
    und = (round(n_d * desirable_weight / n_u / 1.33, 2), round(n_d * desirable_weight / n_u, 2))
    ok = n_d == n_u or des[0] <= desirable_weight <= des[1] or und[0] <= undesirable_weight <= und[1]
    if not ok:
        warnings.warn(f"KTO: {n_d} desirable vs {n_u} undesirable examples but the loss weights do not compensate; "
                      f"use EITHER desirable_weight in [{des[0]}, {des[1]}] OR undesirable_weight in "
                      f"[{und[0]}, {und[1]}] (KTO paper eq. 8)", stacklevel=2)
    return {"desirable_weight": des, "undesirable_weight": und, "in_range": ok}


KTO_LOGS = {
    "kto/desirable_frac": ("KTO: share of desirable (chosen) completions in the batch.",
                           "Exactly 0.5: the recipe feeds each pair's chosen answer as desirable and its rejected "
                           "one as undesirable. Unpaired data away from 0.5 needs re-balanced class weights (KTO eq. "
                           "8)."),
}


@registry.preference(
    "kto", title="KTO: Model Alignment as Prospect Theoretic Optimization",
    summary="unpaired desirable/undesirable losses 1 − σ(±β(u − z_ref)) around a detached, clamped batch KL "
            "baseline from mismatched pairs; class weights desirable_weight / undesirable_weight.",
    equation=r"\mathcal{L} = \frac{1}{B}\Big[\sum_{y\in D}\lambda_D\big(1-\sigma(\beta(u_y - z))\big) + "
             r"\sum_{y\in U}\lambda_U\big(1-\sigma(\beta(z - u_y))\big)\Big],\ "
             r"z = \max\big(0, \mathrm{sg}\,\overline{\log\pi - \log\pi_{ref}}_{\text{mismatched}}\big)",
    logs={**TRL_LOGS, **KL_LOGS, **KTO_LOGS})
def kto(chosen_logp=None, rejected_logp=None, ref_chosen_logp=None, ref_rejected_logp=None, *, beta=0.1,
        desirable_weight=1.0, undesirable_weight=1.0, logp=None, ref_logp=None, label=None, kl_logp=None,
        kl_ref_logp=None, z_ref=None):
    r"""KTO (TRL `KTOTrainer`, `loss_type="kto"`): with u = logπ(y) − logπ_ref(y),

        desirable:    λ_D·(1 − σ(β·(u − z)))      undesirable:  λ_U·(1 − σ(β·(z − u)))

    and the loss is the mean over ALL B completions of the weighted per-completion losses (TRL
    `losses.nanmean()` over the concatenation), so each per-completion loss lies in (0, λ).
    Inputs, exactly one form:
      - unpaired: `logp`, `ref_logp` [B] and `label` [B] (bool or 0/1, True = desirable);
      - paired positional: chosen → desirable, rejected → undesirable (2B completions).
    Baseline z (detached, ≥ 0), exactly one source:
      - `kl_logp`, `kl_ref_logp` [M]: z = clamp(mean(kl_logp − kl_ref_logp), min=0) on mismatched
        prompt/completion pairs (TRL `calculate_KL=True`, single process; across ranks TRL gathers the
        per-rank means before clamping — pass the gathered value as `z_ref` to reproduce that);
      - `z_ref`: a precomputed baseline (float or 0-d tensor; clamped at 0 and detached);
      - neither: z = 0 (TRL's `calculate_KL=False` path).
    Defaults β = 0.1, λ_D = λ_U = 1 (TRL). `kto_weight_ranges` gives TRL's class-imbalance check.
    Metrics (TRL names): `kl` = z, rewards/chosen|rejected = mean β·u over desirable|undesirable, logps/*,
    rewards/margins (when both classes are present); paired form adds rewards/accuracies;
    `kto/desirable_frac`.
    """
    check_beta(beta)
    if desirable_weight < 0 or undesirable_weight < 0:
        raise ValueError(f"KTO class weights must be >= 0, got desirable_weight={desirable_weight}, "
                         f"undesirable_weight={undesirable_weight}")
    paired = any(t is not None for t in (chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp))
    unpaired = any(t is not None for t in (logp, ref_logp, label))
    if paired == unpaired:
        raise ValueError("kto takes EITHER unpaired keywords logp=, ref_logp=, label= (label True = desirable) OR the "
                         "paired positional chosen/rejected/ref_chosen/ref_rejected log-probs; got "
                         + ("both" if paired else "neither"))
    if paired:
        if any(t is None for t in (chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp)):
            raise ValueError("kto paired form needs chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp")
        check_pairs(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp)
        logp = torch.cat([chosen_logp, rejected_logp])
        ref_logp = torch.cat([ref_chosen_logp, ref_rejected_logp])
        label = torch.cat([torch.ones_like(chosen_logp, dtype=torch.bool),
                           torch.zeros_like(rejected_logp, dtype=torch.bool)])
    else:
        if logp is None or ref_logp is None or label is None:
            raise ValueError("kto unpaired form needs logp, ref_logp and label (bool [B], True = desirable)")
        check_pairs(logp, ref_logp, names=("logp", "ref_logp"))
        if logp.dim() != 1:
            raise ValueError(f"kto expects one summed log-prob per completion, shape [B]; got {tuple(logp.shape)}")
        label = torch.as_tensor(label, device=logp.device)
        if label.shape != logp.shape:
            raise ValueError(f"label has shape {tuple(label.shape)} but logp has {tuple(logp.shape)}")
        if label.dtype != torch.bool:
            if not bool(((label == 0) | (label == 1)).all()):
                raise ValueError("label must be bool or 0/1 (True = desirable)")
            label = label.bool()

    if kl_logp is not None or kl_ref_logp is not None:
        if z_ref is not None:
            raise ValueError("kto got both kl_logp/kl_ref_logp and z_ref: give one source for the KL baseline")
        if kl_logp is None or kl_ref_logp is None:
            raise ValueError("kto needs both kl_logp and kl_ref_logp (policy and reference log-probs of the "
                             "mismatched pairs)")
        z = kto_baseline(kl_logp, kl_ref_logp).to(logp.dtype)
    elif z_ref is not None:
        z = torch.as_tensor(z_ref, dtype=logp.dtype, device=logp.device).detach().clamp(min=0)
        if z.numel() != 1 or not bool(torch.isfinite(z)):
            raise ValueError(f"z_ref must be one finite number, got {z_ref!r}")
        z = z.reshape(())
    else:
        z = torch.zeros((), dtype=logp.dtype, device=logp.device)

    u = logp - ref_logp
    desirable = 1 - torch.sigmoid(beta * (u - z))
    undesirable = 1 - torch.sigmoid(beta * (z - u))
    per = torch.where(label, desirable_weight * desirable, undesirable_weight * undesirable)
    loss = per.mean()

    with torch.no_grad():
        rewards = beta * u.detach()
        if paired:
            B = chosen_logp.shape[0]
            metrics = preference_metrics(rewards[:B], rewards[B:], chosen_logp, rejected_logp)
        else:
            metrics = {}
            if bool(label.any()):
                metrics["rewards/chosen"] = float(rewards[label].mean())
                metrics["logps/chosen"] = float(logp.detach()[label].mean())
            if bool((~label).any()):
                metrics["rewards/rejected"] = float(rewards[~label].mean())
                metrics["logps/rejected"] = float(logp.detach()[~label].mean())
            if "rewards/chosen" in metrics and "rewards/rejected" in metrics:
                metrics["rewards/margins"] = metrics["rewards/chosen"] - metrics["rewards/rejected"]
        metrics["kl"] = float(z)
        metrics["kto/desirable_frac"] = float(label.to(logp.dtype).mean())
    return loss, metrics
