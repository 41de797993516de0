"""CISPO: REINFORCE weighted by a clipped, stop-gradient importance weight.

    l = -sg(w) A logp
    TRL:  w = min(r, cap_abs)                         (absolute cap; `epsilon_high` under loss_type="cispo")
    verl: w = clip(r, 1 - eps_low, 1 + eps_high)      (two-sided, relative to 1)
"""
from __future__ import annotations

import torch

from workbench import ops, registry
from workbench.objectives.ppo import CLIP_LOGS, check_inputs
from workbench.objectives.sequence import IS_LEVELS, importance_ratio, ratio_metrics

CONVENTIONS = (
    "CISPO has two incompatible weight conventions; give exactly one: "
    "cap_abs=C (TRL loss_type='cispo', w = min(r, C), an ABSOLUTE cap on r, recommended 5.0; the default) "
    "or cap_abs=None with eps_low=a, eps_high=b (verl 'cispo', w = clip(r, 1 - a, 1 + b), relative to 1)")


def check_cispo(*, cap_abs=5.0, eps_low=None, eps_high=None, **_) -> None:
    """Exactly one of the two weight conventions, with its bounds in range."""
    if cap_abs is not None:
        if eps_low is not None or eps_high is not None:
            raise ValueError(f"{CONVENTIONS}; got cap_abs={cap_abs} together with eps_low={eps_low}, "
                             f"eps_high={eps_high}")
        if cap_abs < 1:
            raise ValueError(f"cap_abs={cap_abs} < 1 would down-weight even on-policy tokens (r = 1): cap_abs "
                             f"is an absolute cap on r (e.g. 5.0); for a cap relative to 1 use eps_high. "
                             f"{CONVENTIONS}")
        return
    if eps_low is None or eps_high is None:
        raise ValueError(f"{CONVENTIONS}; got cap_abs=None, eps_low={eps_low}, eps_high={eps_high}")
    if eps_low < 0 or eps_high < 0:
        raise ValueError(f"eps_low and eps_high must be >= 0, got {eps_low}, {eps_high}")


def cispo_weight(r: torch.Tensor, *, cap_abs=None, eps_low=None, eps_high=None) -> torch.Tensor:
    """The (undetached) CISPO weight of ratio r under exactly one of the two conventions."""
    check_cispo(cap_abs=cap_abs, eps_low=eps_low, eps_high=eps_high)
    return r.clamp(max=cap_abs) if cap_abs is not None else r.clamp(1 - eps_low, 1 + eps_high)


CISPO_LOGS = {
    "clip/cispo": ("CISPO: fraction of tokens with A > 0 whose IS weight hit the cap (their weight is truncated).",
                   "Near 0: with the default cap of 5 only tokens whose ratio grew fivefold are truncated (0 on the "
                   "smoke runs). Rising: several optimizer steps per batch move some tokens very far."),
    "cispo/weight_mean": ("CISPO: mean stop-gradient IS weight min(r, cap) over valid tokens.",
                          "Close to 1 and equal to ratio/mean while the cap of 5 does not bind. Clearly below "
                          "ratio/mean: the cap truncates many weights, see clip/cispo."),
}


@registry.objective(
    "cispo", title="MiniMax-M1: Scaling Test-Time Compute Efficiently with Lightning Attention",
    summary="REINFORCE weighted by a clipped stop-gradient IS weight: every token keeps a gradient. "
            "cap_abs (TRL, absolute) XOR eps_low/eps_high (verl, relative).",
    equation=r"\ell_{i,t} = -\mathrm{sg}(w_{i,t})A_i\log\pi_\theta(y_t),\quad w = \min(r, C)\ \text{(TRL)}"
             r"\ \text{or}\ \mathrm{clip}(r, 1-\epsilon_{low}, 1+\epsilon_{high})\ \text{(verl)}",
    logs={**CLIP_LOGS, **CISPO_LOGS}, choices={"level": IS_LEVELS}, check=check_cispo)
def cispo(logp, old_logp, advantages, mask, *, agg="token-mean", denom=None, cap_abs=5.0, eps_low=None,
          eps_high=None, logr_clamp=None, level="token"):
    r"""CISPO: l = -sg(w) A logp, the weight truncated but never zeroed (contrast ppo-clip).

    Conventions (exactly one; anything else is a ValueError that explains both):
      - `cap_abs` (default 5.0, TRL `loss_type="cispo"` reading `epsilon_high` as an absolute cap,
        ScaleRL's recommendation): w = min(r, cap_abs); cap_abs must be >= 1.
      - `eps_low`, `eps_high` with `cap_abs=None` (verl `cispo`, rlhf-book `CISPOLoss`):
        w = clip(r, 1 - eps_low, 1 + eps_high). Passing eps_* while cap_abs keeps its default is an error:
        set cap_abs=None explicitly, so the two readings of "epsilon_high" can never mix.
    With eps_low >= 1 (no lower bound) and cap_abs = 1 + eps_high the two coincide.
    Gradient per token: -w A ∇logp. Default aggregation token-mean (TRL aggregates CISPO like `dapo`).
    logr_clamp=None (TRL); verl clamps logp - old to +-20.
    `level="sequence"` (TRL `importance_sampling_level="sequence"`): the weight is min(s_i, cap) of the
    length-normalized sequence ratio s_i, the same for every token of the sequence; clip metrics count sequences.
    Metrics: `clip/cispo` = mean(m [r > cap and A > 0]) with cap = cap_abs or 1 + eps_high (= `clip/high`);
    `clip/low` = mean(m [r < 1 - eps_low and A < 0]) (always 0 under cap_abs); `clip/out_of_band` = the
    fraction of tokens whose weight was truncated, whatever the sign of A; `cispo/weight_mean` = mean w.
    """
    check_inputs(logp, old_logp, advantages, mask)
    with torch.no_grad():
        r = importance_ratio(logp.detach(), old_logp.detach(), mask, level, logr_clamp)  # [B, T] or [B, 1]
        w = cispo_weight(r, cap_abs=cap_abs, eps_low=eps_low, eps_high=eps_high)
    loss = ops.aggregate(-w * advantages * logp, mask, agg, denom)
    inf = float("inf")
    lo, hi = (inf, cap_abs - 1) if cap_abs is not None else (eps_low, eps_high)
    metrics = ratio_metrics(r, advantages, mask, lo, hi)
    metrics["clip/cispo"] = metrics["clip/high"]
    metrics["cispo/weight_mean"] = float(ops.masked_mean(w.expand_as(mask), mask))
    return loss, metrics
