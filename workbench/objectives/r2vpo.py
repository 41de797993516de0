"""R²VPO: a ratio-variance penalty with a dual-ascent weight instead of PPO's hard clip (abstract-only reading).

    r   = exp(logp - old)                         E_{pi_old}[r] = 1, so Var(r) = E[(r - 1)^2]
    w   = sg(min(pi_old / mu, is_cap))            stale (replayed) samples re-weighted, not discarded
    l   = w (-r A + lam (r - 1)^2)                lam: the dual variable, driven by the controller `r2vpo`
    lam <- max(0, lam + lr (Var_hat(r) - delta))  after each step (controllers/r2vpo.py)

The penalty's gradient 2 lam (r - 1) grad r grows smoothly with the distance from pi_old: there is no region
where a token's gradient is cut off, so high-advantage, high-divergence tokens keep their signal.

No reference implementation was located (arXiv 2601.03320, 2605.26784); see `r2vpo` for our reading.
"""
from __future__ import annotations

import torch

from workbench import ops, registry
from workbench.objectives.ppo import CLIP_LOGS, check_inputs, ratio
from workbench.objectives.tis import tis_weights

R2VPO_TITLE = "Ratio-Variance Regularized Policy Optimization for Efficient LLM Fine-tuning"


def check_r2vpo(*, lam=1.0, is_cap=2.0, **_) -> None:
    if not lam >= 0:
        raise ValueError(f"lam (the dual variable) must be >= 0, got {lam}")
    if is_cap is not None and not is_cap > 0:
        raise ValueError(f"is_cap must be > 0 or None, got {is_cap}")


def stale_weight(old_logp, mu_logp, mask, is_cap) -> torch.Tensor:
    """Detached w = min(pi_old / mu, is_cap) [B, T] (TIS token truncation), or 1 on the mask when is_cap is None."""
    if is_cap is None:
        return mask.to(old_logp.dtype)
    return tis_weights(old_logp, mu_logp, mask, mode="token_truncate", cap=is_cap)


R2VPO_LOGS = {
    "r2vpo/ratio_var": ("R²VPO: measured ratio variance, token mean of w (r - 1)^2 (what the dual ascent reads).",
                        "0 with one optimizer step per batch; 0.003 to 0.06 with two minibatches on the smoke run. "
                        "Well above delta (0.02) step after step while lam climbs: the penalty does not hold the "
                        "update."),
}


@registry.objective(
    "r2vpo", title=R2VPO_TITLE,
    summary="Unclipped IS surrogate plus lam times the ratio variance (r - 1)^2, lam raised by dual ascent while "
            "the measured variance exceeds delta; stale samples weighted by min(pi_old/mu, 2).",
    equation=r"\ell = w\big(-rA + \lambda (r - 1)^2\big),\ w = \mathrm{sg}\big(\min(\pi_{old}/\mu, C)\big),\ "
             r"\lambda \leftarrow \max\big(0, \lambda + \alpha_\lambda(\widehat{\mathrm{Var}}(r) - \delta)\big)",
    reads=("mu_logp",), logs={**{k: CLIP_LOGS[k] for k in ("ratio/mean", "ratio/max", "kl/k3_old")}, **R2VPO_LOGS},
    check=check_r2vpo)
def r2vpo(logp, old_logp, advantages, mask, *, mu_logp, agg="token-mean", denom=None, lam=1.0, is_cap=2.0,
          logr_clamp=None):
    """R²VPO policy loss; `lam` is the dual variable (the controller `r2vpo` drives it, into="objective:r2vpo.lam").

    Our reading (abstract-only: the catalog's reading, with its decisions):
    - the constraint is on the second moment about 1, Var(r) = E_{pi_old}[(r - 1)^2] (E_{pi_old}[r] = 1); the
      penalty is aggregated like the surrogate (the recipe's mode), the measured variance the controller reads is a
      token mean. lam = 0 is the unclipped IS policy gradient -agg(w r A).
    - the constant -lam delta of the Lagrangian has no gradient and is left out of the loss; delta lives only in
      the controller, so it is set in one place.
    - lam = 1.0 to start: the penalty's pull 2 lam (r - 1) then matches |A| ~ 1 at |r - 1| = 0.5, well outside
      PPO's 0.2 band, so the first steps are close to the unclipped surrogate; dual ascent takes it from there.
    - stale samples: w = min(pi_old / mu, is_cap) with is_cap = 2 (the catalog's default; TIS's truncation), on
      both terms, since both are expectations under pi_old estimated from mu's samples. is_cap=None: w = 1.
    Metrics: `r2vpo/ratio_var` = token mean of w (r - 1)^2 (what the controller reads), `ratio/mean`, `ratio/max`,
    `kl/k3_old`.
    """
    check_r2vpo(lam=lam, is_cap=is_cap)
    check_inputs(logp, old_logp, advantages, mask)
    old = old_logp.detach()
    w = stale_weight(old, mu_logp, mask, is_cap)
    r = ratio(logp, old, logr_clamp)
    deviation = (r - 1) ** 2  # [B, T]
    loss = ops.aggregate(w * (-r * advantages + lam * deviation), mask, agg, denom)
    with torch.no_grad():
        logr = torch.log(r)
        metrics = {"r2vpo/ratio_var": ops.masked_mean(w * deviation, mask),
                   "ratio/mean": ops.masked_mean(r, mask), "ratio/max": (r * mask).max(),
                   "kl/k3_old": ops.masked_mean(torch.expm1(logr) - logr, mask)}
    return loss, {k: float(v) for k, v in metrics.items()}
