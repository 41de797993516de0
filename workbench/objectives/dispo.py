"""DISPO: CISPO's stop-gradient IS weight with four bounds (up / down x correct / incorrect) and no gradient
outside the trust region.

    r_t = exp(logp_t - old_t)
    c_i = + when A_i > 0 (a correct response), - when A_i < 0 (an incorrect one)
    M_t = [1 - eps_low^c <= r_t <= 1 + eps_high^c]                  two-sided, per class
    l_t = -M_t sg(w_t) A_t logp_t,  w_t = clip(r_t, 1 - eps_low^c, 1 + eps_high^c)   (= r_t where M_t = 1)

CISPO keeps a clipped weight on every token; DISPO zeroes the tokens outside their class's band instead.
"""
from __future__ import annotations

import torch

from workbench import ops, registry
from workbench.objectives.cispo import cispo_weight
from workbench.objectives.ppo import CLIP_LOGS, check_inputs, clip_metrics, ratio

BOUNDS = ("eps_low_pos", "eps_high_pos", "eps_low_neg", "eps_high_neg")


def check_bounds(**bounds) -> None:
    for name, value in bounds.items():
        if not value >= 0:  # also refuses NaN
            raise ValueError(f"{name} must be >= 0 (float('inf') for no bound), got {value}")


def class_bounds(advantages, *, eps_low_pos, eps_high_pos, eps_low_neg, eps_high_neg):
    """(eps_low, eps_high) [B, T] of each token by its response's class: the correct bounds where A > 0, the
    incorrect ones elsewhere (A = 0 tokens carry no gradient, whichever bounds they get)."""
    pos = advantages > 0
    low = torch.where(pos, advantages.new_tensor(eps_low_pos), advantages.new_tensor(eps_low_neg))
    high = torch.where(pos, advantages.new_tensor(eps_high_pos), advantages.new_tensor(eps_high_neg))
    return low, high


def dispo_weight(r, advantages, *, eps_low_pos, eps_high_pos, eps_low_neg, eps_high_neg):
    """(w, inside): the detached DISPO weight [B, T] and the trust-region mask M [B, T] bool.

    w = CISPO's clipped weight of the token's class, times M: r inside the band, exactly 0 outside.
    """
    with torch.no_grad():
        w_pos = cispo_weight(r, eps_low=eps_low_pos, eps_high=eps_high_pos)
        w_neg = cispo_weight(r, eps_low=eps_low_neg, eps_high=eps_high_neg)
        low, high = class_bounds(advantages, eps_low_pos=eps_low_pos, eps_high_pos=eps_high_pos,
                                 eps_low_neg=eps_low_neg, eps_high_neg=eps_high_neg)
        inside = (r >= 1 - low) & (r <= 1 + high)
        w = torch.where(advantages > 0, w_pos, w_neg) * inside
    return w, inside


def regime_metrics(r, advantages, inside, mask) -> dict[str, float]:
    """Fractions of valid tokens masked in each of the four regimes (the paper's 2 x 2 panel)."""
    with torch.no_grad():
        out = ~inside
        regimes = {"pos_high": (advantages > 0) & (r > 1), "pos_low": (advantages > 0) & (r < 1),
                   "neg_high": (advantages < 0) & (r > 1), "neg_low": (advantages < 0) & (r < 1)}
        metrics = {f"dispo/masked_{k}": float(ops.masked_mean((out & v).to(mask.dtype), mask))
                   for k, v in regimes.items()}
        metrics["dispo/masked_frac"] = float(ops.masked_mean((out & (advantages != 0)).to(mask.dtype), mask))
    return metrics


DISPO_LOGS = {
    "dispo/masked_frac": ("DISPO: fraction of valid tokens with A != 0 whose ratio is outside their class's band (no "
                          "gradient).",
                          "0 on the first minibatch after a rollout (r = 1), a few percent with several. Tens of "
                          "percent: most tokens lose their gradient and learning stalls; bounds too tight for the "
                          "step."),
    "dispo/masked_pos_high": ("DISPO: fraction of valid tokens of correct responses (A > 0) masked above 1 + "
                              "eps_high_pos.",
                              "Small. High and rising: correct tokens hit the upper bound, which caps the "
                              "exploration (entropy-raising) regime; widen eps_high_pos if entropy collapses."),
    "dispo/masked_pos_low": ("DISPO: fraction of valid tokens of correct responses masked below 1 - eps_low_pos.",
                             "Small. High: correct tokens already pushed down are cut off (the distillation regime); "
                             "the paper links too much of that regime to slow entropy loss and degradation."),
    "dispo/masked_neg_high": ("DISPO: fraction of valid tokens of incorrect responses (A < 0) masked above 1 + "
                              "eps_high_neg.",
                              "Small. High with repetitive samples: the paper's repetition collapse under "
                              "over-restrictive incorrect-response clipping."),
    "dispo/masked_neg_low": ("DISPO: fraction of valid tokens of incorrect responses masked below 1 - eps_low_neg.",
                             "Small. High with response length falling towards 0: the paper's vanishing-length "
                             "collapse; loosen eps_low_neg."),
}


@registry.objective(
    "dispo", title="DISPO: Enhancing Training Efficiency and Stability in Reinforcement Learning for Large Language "
                   "Model Mathematical Reasoning",
    summary="CISPO-style -sg(r) A logp with separate up/down bounds for correct (A > 0) and incorrect (A < 0) "
            "responses; tokens outside their class's band get no gradient.",
    equation=r"\ell_t = -M_t\,\mathrm{sg}(r_t)\,A_t\log\pi_\theta(y_t),\quad "
             r"M_t = \big[1-\epsilon^{c}_{low} \le r_t \le 1+\epsilon^{c}_{high}\big],\ c = \mathrm{sign}(A_t)",
    logs={**CLIP_LOGS, **DISPO_LOGS})
def dispo(logp, old_logp, advantages, mask, *, agg="token-mean", denom=None, eps_low_pos=0.2, eps_high_pos=0.28,
          eps_low_neg=0.2, eps_high_neg=0.28, logr_clamp=None):
    r"""DISPO (arXiv 2602.00983, AISTATS 2026). No reference implementation located; the paper's abstract says it
    "decouples the up-clipping and down-clipping of importance sampling weights for correct and incorrect
    responses" and, unlike CISPO, permits no gradient outside the trust region. The method section could not be
    read here (only the abstract is stored), so the exact form is `abstract-only`.

    Our reading (the catalog's): l_t = -M_t sg(r_t) A_t logp_t with M_t = [1 - eps_low^c <= r_t <= 1 + eps_high^c]
    and c the class of the token's response.
      - Class: read from the sign of the advantage (A > 0 correct, A < 0 incorrect). With GRPO on 0/1 rewards this
        is exactly the response's correctness in every group that carries a gradient; A = 0 tokens contribute
        nothing whatever their class. It keeps the objective signature (no reward field needed per minibatch).
      - Two-sided masking (decision (a)): the abstract's "outside the trust region" masks both r > 1 + eps_high
        and r < 1 - eps_low, whatever the sign of A (PPO masks only the advantage direction).
      - Inside the band sg(w) = sg(r): CISPO's clipped weight `cispo_weight` (verl convention) equals r there.
    Defaults (decision (b)): 0.2 / 0.28 for both classes (DAPO's clip-higher, the catalog's starting point); the
    paper's four tuned values are `unverified`; logr_clamp=None (no log-ratio clamp, as `cispo`); agg token-mean
    (CISPO and DAPO aggregate per token). Equal bounds and no token outside reproduce `cispo` with cap_abs=None,
    eps_low/eps_high. Gradient per token: -M_t r_t A_t ∇logp_t (token-mean: divided by N).
    Regimes the paper reports: correct & r > 1 raises entropy (exploration), correct & r < 1 lowers it
    (distillation); too tight incorrect bounds collapse into repetition (r > 1) or vanishing length (r < 1).
    Metrics: PPO clip fractions with the per-token class bounds (`clip/out_of_band` counts every masked token),
    `dispo/masked_frac` (masked tokens with A != 0), and one masked fraction per regime
    (`dispo/masked_{pos,neg}_{high,low}`).
    """
    check_bounds(eps_low_pos=eps_low_pos, eps_high_pos=eps_high_pos, eps_low_neg=eps_low_neg,
                 eps_high_neg=eps_high_neg)
    check_inputs(logp, old_logp, advantages, mask)
    bounds = dict(eps_low_pos=eps_low_pos, eps_high_pos=eps_high_pos, eps_low_neg=eps_low_neg,
                  eps_high_neg=eps_high_neg)
    r = ratio(logp.detach(), old_logp.detach(), logr_clamp)  # [B, T], no gradient: the weight is sg(.)
    w, inside = dispo_weight(r, advantages, **bounds)
    loss = ops.aggregate(-w * advantages * logp, mask, agg, denom)
    low, high = class_bounds(advantages, **bounds)
    metrics = clip_metrics(r, advantages, mask, low, high)
    metrics.update(regime_metrics(r, advantages, inside, mask))
    return loss, metrics
