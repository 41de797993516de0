"""ReMix's KL-Convex constraint: a convex mix of the KL to the base model and the KL to the precedent policy.

    L_KL = beta * agg( lam * k2(pi_theta, pi_base) + (1 - lam) * k2(pi_theta, pi_prec) )
    k2(pi, q) = (log pi - log q)^2 / 2        per token, on the sampled tokens (workbench/kl.py)

pi_base is the run's KL reference (`ref_logp`; the warm start, replaced by the policy at the reincarnation step:
references/remix.py). pi_prec, the precedent policy, is the policy this step's update starts from, pi_old, whose
log-probs the forward pass after the rollout computes for every row of the batch, replayed ones included
(`old_logp`): exact for every row, and no model copy. The term then keeps the UTD > 1 updates of one step near their
start (it is 0, with zero gradient, at the step's first optimizer step), while the base term anchors the whole run.

Decisions (the paper's abstract gives the form only): lam = 0.5 and the k2 estimator for both terms (the card's);
precedent = pi_old, the iterate before this step's update (the alternative reading, the policy one step earlier,
would need a second frozen copy lagging a step); beta = 0.04, GRPO's KL coefficient in this project, so lam = 1 is
GRPO's KL term with the k2 estimator. The run's `kl_coef` sets beta.

Reference: none located (arXiv 2507.06892, abstract only).
"""
from __future__ import annotations

import torch

from workbench import kl, ops, registry
from workbench.objectives.remix import REMIX_TITLE

KL_CONVEX_LOGS = {
    "remix/kl_base": ("ReMix: mean per-token estimate (k2) of KL(pi || pi_base), base = the reference (the warm start, "
                      "then the policy at the reincarnation), averaged over optimizer steps.",
                      "Starts near 0 and grows slowly; drops to 0 at the reincarnation step and grows again."),
    "remix/kl_precedent": ("ReMix: mean per-token estimate (k2) of KL(pi || pi_old), how far the UTD updates moved "
                           "from the step's starting policy, averaged over optimizer steps.",
                           "0 at each step's first optimizer step, small (1e-4 to 1e-2) after; large: the step's "
                           "updates run far from the data's policy."),
}


def check_kl_convex(*, lam=0.5, beta=0.04, estimator="k2", **_) -> None:
    if isinstance(lam, bool) or not isinstance(lam, (int, float)) or not 0 <= lam <= 1:
        raise ValueError(f"lam={lam!r}: the weight of the KL to the base must be in [0, 1] (the card's 0.5; 1: base "
                         "only, 0: precedent only)")
    if isinstance(beta, bool) or not isinstance(beta, (int, float)) or beta < 0:
        raise ValueError(f"beta={beta!r}: the KL-Convex coefficient must be a number >= 0 (--set kl_coef=X)")
    if estimator not in kl.KINDS:
        raise ValueError(f"estimator={estimator!r}: choose one of {kl.KINDS} (the card's k2)")


def kl_convex_per_token(logp, ref_logp, prec_logp, *, lam=0.5, estimator="k2") -> tuple[torch.Tensor, ...]:
    """(lam k(pi, base) + (1 - lam) k(pi, prec), k(pi, base), k(pi, prec)), each [B, T]; base and precedent log-probs
    are detached (only pi_theta moves)."""
    base = kl.estimate(logp, ref_logp.detach(), estimator)
    prec = kl.estimate(logp, prec_logp.detach(), estimator)
    return lam * base + (1 - lam) * prec, base, prec


@registry.regularizer(
    "remix", title=REMIX_TITLE,
    summary="KL-Convex: beta x (lam KL(pi || pi_base) + (1 - lam) KL(pi || pi_prec)), lam = 0.5, k2 estimators; base = "
            "the reference (reincarnated half-way), precedent = pi_old, the policy the step's updates start from.",
    equation=r"\mathcal{L}_{KL} = \beta\,\mathrm{agg}\big(\lambda\,k_2(\pi_\theta, \pi_{base}) + "
             r"(1-\lambda)\,k_2(\pi_\theta, \pi_{prec})\big)",
    reads=("ref_logp", "old_logp"), coefficients={"kl_coef": "beta"}, kl_estimator="estimator",
    choices={"estimator": kl.KINDS}, logs=KL_CONVEX_LOGS, check=check_kl_convex)
def kl_convex(forward, batch, *, agg="token-mean", denom=None, beta=0.04, lam=0.5, estimator="k2"):
    """The KL-Convex term on the training forward's log-probs [B, T], the batch's `ref_logp` (base) and `old_logp`
    (precedent), on `batch.mask`. Logs remix/kl_base and remix/kl_precedent."""
    check_kl_convex(lam=lam, beta=beta, estimator=estimator)
    per_token, base, prec = kl_convex_per_token(forward.logp, batch.ref_logp, batch.old_logp, lam=lam,
                                                estimator=estimator)
    metrics = {"remix/kl_base": float(ops.masked_mean(base.detach(), batch.mask)),
               "remix/kl_precedent": float(ops.masked_mean(prec.detach(), batch.mask))}
    if beta == 0:
        return forward.logp.new_zeros(()), metrics
    return beta * ops.aggregate(per_token, batch.mask, agg, denom), metrics
