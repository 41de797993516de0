"""Per-token KL estimators of KL(pi || ref) from log-probs of tokens sampled from pi.

With logr = logp - ref_logp on y ~ pi (Schulman, "Approximating KL Divergence"):
    k1 = logr                       unbiased, high variance, can be negative
    k2 = logr^2 / 2                 biased in value; its gradient is the reverse-KL gradient
    k3 = exp(-logr) - 1 + logr      unbiased, >= 0, low variance (verl `low_var_kl`)
    abs = |logr|
A `+` suffix (verl `k1+`, `k3+`, `abs+`) is the straight-through form: value of k_x, gradient of k2.
"""
from __future__ import annotations

import torch

from workbench import registry

_TITLE = "Approximating KL Divergence"


def _logr(logp, ref_logp, logr_clamp):
    logr = logp - ref_logp
    return logr if logr_clamp is None else logr.clamp(-logr_clamp, logr_clamp)


# The loop logs `kl` with the recipe's estimator (`Trainer.rollout_metrics`); KTO logs its KL baseline under the same
# name, so both declare it from here.
KL_LOGS = {
    "kl": ("Mean per-token KL(pi || ref) estimate (recipe's estimator) to the frozen reference; grows slowly when "
           "healthy. KTO logs its batch KL baseline z_ref under this name (0 here: no mismatched pairs).",
           "Starts at 0 and grows slowly and smoothly. A steep climb means the policy leaves the reference fast "
           "(raise the KL coefficient or lower the learning rate)."),
}


@registry.kl("k1", title=_TITLE, summary="Naive log-ratio estimator; unbiased, may be negative.",
                      equation=r"k_1 = \log\frac{\pi_\theta}{\pi_{ref}}")
def k1(logp, ref_logp, *, logr_clamp=None):
    return _logr(logp, ref_logp, logr_clamp)


@registry.kl("k2", title=_TITLE, summary="Half squared log-ratio; gradient of reverse KL on-policy.",
                      equation=r"k_2 = \tfrac12\left(\log\frac{\pi_\theta}{\pi_{ref}}\right)^2")
def k2(logp, ref_logp, *, logr_clamp=None):
    return 0.5 * _logr(logp, ref_logp, logr_clamp) ** 2


@registry.kl("k3", title=_TITLE, summary="Unbiased non-negative low-variance estimator (verl low_var_kl).",
                      equation=r"k_3 = \frac{\pi_{ref}}{\pi_\theta} - 1 - \log\frac{\pi_{ref}}{\pi_\theta}")
def k3(logp, ref_logp, *, logr_clamp=None):
    logr = _logr(logp, ref_logp, logr_clamp)
    return torch.expm1(-logr) + logr  # expm1 keeps precision near logr = 0


@registry.kl("abs", title=_TITLE, summary="Absolute log-ratio (verl `abs`).",
                      equation=r"|\log\pi_\theta - \log\pi_{ref}|")
def abs_(logp, ref_logp, *, logr_clamp=None):
    return _logr(logp, ref_logp, logr_clamp).abs()


ESTIMATORS = {"k1": k1, "k2": k2, "k3": k3, "abs": abs_}
KINDS = (*ESTIMATORS, *(f"{k}+" for k in ESTIMATORS))  # `estimate`'s: an estimator, or its straight-through form


@registry.kl(
    "kl-straight-through", title=_TITLE,
    summary="Forward value of k1/k3/abs with the gradient of k2 (verl `k1+`, `k3+`, `abs+`).",
    equation=r"k = k_2 - \mathrm{sg}(k_2) + \mathrm{sg}(k_x)", choices={"base": tuple(ESTIMATORS)})
def straight_through(logp, ref_logp, *, base="k3", logr_clamp=None, value_clamp=None):
    """Value k_x (clamped as asked), gradient of the unclamped k2 = logp - ref everywhere.

    The clamps touch the forward value only (as in verl): a token far from the reference still gets
    the full reverse-KL gradient instead of none.
    """
    value = clamp_value(ESTIMATORS[base](logp, ref_logp, logr_clamp=logr_clamp), value_clamp)
    grad_carrier = k2(logp, ref_logp)
    return grad_carrier - grad_carrier.detach() + value.detach()


def clamp_value(x: torch.Tensor, value_clamp: float | None) -> torch.Tensor:
    return x if value_clamp is None else x.clamp(-value_clamp, value_clamp)


def estimate(logp: torch.Tensor, ref_logp: torch.Tensor, kind: str = "k3", *, logr_clamp: float | None = None,
             value_clamp: float | None = None) -> torch.Tensor:
    """Per-token KL(pi || ref) estimate. kind in k1, k2, k3, abs, or k1+/k3+/abs+ (straight-through).

    `logr_clamp` bounds logp - ref before the estimator (verl: 20); `value_clamp` bounds the result
    (verl `low_var_kl` and OpenRLHF: 10). TRL uses neither. For the `+` kinds both bound the value only.
    """
    if logp.shape != ref_logp.shape:
        raise ValueError(f"logp {tuple(logp.shape)} and ref_logp {tuple(ref_logp.shape)} differ in shape")
    base = kind[:-1] if kind.endswith("+") else kind
    if base not in ESTIMATORS:
        raise ValueError(f"unknown KL estimator {kind!r}; choose from {sorted(ESTIMATORS)} (+ suffix allowed)")
    if kind.endswith("+"):
        return straight_through(logp, ref_logp, base=base, logr_clamp=logr_clamp, value_clamp=value_clamp)
    return clamp_value(ESTIMATORS[base](logp, ref_logp, logr_clamp=logr_clamp), value_clamp)
