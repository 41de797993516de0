"""SAFE's entropy-gated KL excess penalty (and, for `safe`, its entropy bonus).

    KL    = mean_t m (logp - ref)                                   token mean over the minibatch (k1)
    kl_s  = d sg(kl_s_prev) + (1 - d) KL                             short EMA, d = 0.9; kl_s_prev from the controller
    g(H)  = max(0.5, H_floor / (H + 0.1))                            entropy gate, H_floor = 2.0 (low H amplifies)
    P     = c (kl_s - theta)^2 [kl_s > theta] g(H)                   c = 0.1; theta from the controller

The threshold theta and kl_s_prev are driven by the controller `safe-kl-control`
(workbench/controllers/safe.py; into="regularizer:safe-kl-control" or "regularizer:safe").

Reference: ryyzn9/SAFE `safe/controllers/entropy_aware.py` (`compute_penalty`), `safe/trainers/safe.py`
(`train_step`), `configs/base.yaml`, commit 183daf7a. The trainer passes `kl.item()`, so the reference penalty
is a float without gradient; by default kl_s keeps KL as a tensor (the catalog's fix), reference_bug=True
reproduces the float.
"""
from __future__ import annotations

import torch

from workbench import ops, registry
from workbench.regularizers.entropy import entropy_bonus

SAFE_TITLE = "SAFE: Stable Alignment Finetuning with Entropy-Aware Predictive Control for RLHF"


def entropy_gate(entropy: float, entropy_floor: float = 2.0) -> float:
    """g(H) = max(0.5, H_floor / (H + 0.1)): non-increasing in H, 0.5 at high entropy."""
    return max(0.5, entropy_floor / (entropy + 0.1))


def rollout_entropy(entropy: torch.Tensor, mask: torch.Tensor) -> float:
    """The reference's `rollouts["entropy"]`: per-sequence token mean of the sampling entropy, then the batch mean."""
    return float(ops.aggregate(entropy.detach(), mask, "seq-mean-token-mean"))


def kl_excess_penalty(kl, kl_short_prev, threshold, entropy, *, coef=0.1, kl_short_decay=0.9, entropy_floor=2.0,
                      reference_bug=False):
    """(P, kl_s, gate): P = coef (kl_s - theta)^2 [kl_s > theta] g(H), kl_s = d kl_short_prev + (1 - d) KL.

    `kl` is a scalar tensor; the gradient flows through it unless reference_bug (the reference's `kl.item()`).
    `entropy` is a float (no gradient), as the reference's rollout entropy. The gate is 1 where P is inactive."""
    kl = kl.detach() if reference_bug else kl
    kl_short = kl_short_decay * float(kl_short_prev) + (1 - kl_short_decay) * kl
    if kl_short.item() <= threshold:
        return kl.new_zeros(()) * kl, kl_short, 1.0  # 0 with the graph kept (zero gradient)
    gate = entropy_gate(entropy, entropy_floor)
    return coef * (kl_short - threshold) ** 2 * gate, kl_short, gate


def check_safe(coef, kl_short_decay, entropy_floor, threshold):
    if coef < 0:
        raise ValueError(f"coef must be >= 0, got {coef}")
    if not 0 <= kl_short_decay < 1:
        raise ValueError(f"kl_short_decay must be in [0, 1), got {kl_short_decay}")
    if not entropy_floor > 0:
        raise ValueError(f"entropy_floor must be > 0, got {entropy_floor}")
    if not threshold > 0:
        raise ValueError(f"threshold must be > 0, got {threshold}")


# What `safe_penalty` logs, for both of SAFE's regularizers.
SAFE_LOGS = {
    "safe/kl": ("SAFE: token mean of logp - ref_logp on the training forward (k1), the KL its controller tracks.",
                "Starts about 0 and grows slowly; can be slightly negative (a sampled k1 estimate). Climbing fast: "
                "the policy leaves the reference, and kl_s will soon cross the threshold."),
    "safe/kl_short": ("SAFE: short EMA kl_s = 0.9 kl_s' + 0.1 KL compared with the threshold theta.",
                      "A tenth of safe/kl at first, then tracks it with a lag. Above the threshold (0.1 to 0.6): the "
                      "penalty is on."),
    "safe/penalty": ("SAFE: 0.1 (kl_s - theta)^2 g(H) where kl_s > theta, else 0.",
                     "0 on healthy short runs (kl_s stays far below theta >= 0.1). Positive for many steps: the KL "
                     "budget is exceeded; a low entropy doubles it or more through the gate."),
    "safe/gate": ("SAFE: entropy gate g(H) = max(0.5, 2 / (H + 0.1)) on an active penalty (1 while inactive).",
                  "1 while the penalty is off; when on, 0.5 at high entropy (> 3.9 nats) up to 20 near entropy 0."),
    "safe/active": ("SAFE: share of minibatches whose kl_s exceeded the threshold (penalty on).",
                    "0 on healthy runs. Near 1 for long: the threshold is too tight or the KL runs away."),
}


def safe_penalty(forward, batch, *, coef, kl_short_decay, entropy_floor, threshold, kl_short_prev, reference_bug):
    """(P, metrics) of a minibatch: KL = token mean of logp - ref_logp (with gradient), H = the batch's rollout
    entropy (`batch.entropy`, detached)."""
    check_safe(coef, kl_short_decay, entropy_floor, threshold)
    batch.require("ref_logp", "entropy")
    kl = ops.masked_mean(forward.logp - batch.ref_logp, batch.mask)
    penalty, kl_short, gate = kl_excess_penalty(
        kl, kl_short_prev, threshold, rollout_entropy(batch.entropy, batch.mask), coef=coef,
        kl_short_decay=kl_short_decay, entropy_floor=entropy_floor, reference_bug=reference_bug)
    return penalty, {"safe/kl": kl.item(), "safe/kl_short": kl_short.item(), "safe/penalty": penalty.item(),
                     "safe/gate": gate, "safe/active": float(kl_short.item() > threshold)}


@registry.regularizer(
    "safe-kl-control", title=SAFE_TITLE,
    summary="Penalty 0.1 (kl_s - theta)^2 on the short-EMA KL above a PID/phase-controlled threshold theta, "
            "amplified at low entropy; theta and the EMA come from the controller safe-kl-control.",
    equation=r"P = c\,(\mathrm{kl}_s - \theta)^2\,[\mathrm{kl}_s > \theta]\,\max\!\big(0.5, \tfrac{H_f}{H + 0.1}\big),"
             r"\ \mathrm{kl}_s = 0.9\,\mathrm{sg}(\mathrm{kl}_s') + 0.1\,\mathrm{KL}",
    reads=("ref_logp", "entropy"), logs=SAFE_LOGS)
def safe_kl_control(forward, batch, *, agg="token-mean", denom=None, coef=0.1, threshold=0.45, kl_short_prev=0.0,
                    kl_short_decay=0.9, entropy_floor=2.0, reference_bug=False):
    """SAFE's thresholded KL penalty. Defaults from `safe/controllers/entropy_aware.py` and `configs/base.yaml`:
    coef 0.1, EMA decay 0.9, entropy_floor 2.0; `threshold` 0.45 = 0.3 x 1.5 (base threshold in the warm-up phase,
    the controller's first value) and `kl_short_prev` 0 are what the controller drives.

    The KL is the token mean of logp - ref_logp on the minibatch, whatever the recipe's aggregation (`agg` is
    unused), as the reference computes it. Our reading: the reference updates kl_s (and its PID / phase state)
    inside the loss at every optimizer step; here the controller advances once per training step, and every
    minibatch of the step computes kl_s from the last step's EMA and its own live KL. The gradient-preview guard
    (scale a step whose predicted KL exceeds 0.5) is defined in the reference but never called by its trainer,
    so it is not ported. reference_bug=True reproduces `kl.item()` (no gradient; the penalty only shifts the loss).
    Metrics: `safe/kl`, `safe/kl_short`, `safe/penalty`, `safe/gate`, `safe/active`.
    """
    return safe_penalty(forward, batch, coef=coef, kl_short_decay=kl_short_decay, entropy_floor=entropy_floor,
                        threshold=threshold, kl_short_prev=kl_short_prev, reference_bug=reference_bug)


@registry.regularizer(
    "safe", title=SAFE_TITLE,
    summary="SAFE's loss terms besides PPO and the critic: the entropy-gated KL excess penalty of safe-kl-control "
            "plus an entropy bonus 0.01 H (its soft-min critic is the value `safe`).",
    equation=r"L \mathrel{+}= c\,(\mathrm{kl}_s - \theta)^2\,[\mathrm{kl}_s > \theta]\,g(H) - c_H\,\mathrm{agg}(H_t),"
             r"\ g(H) = \max\!\big(0.5, \tfrac{H_f}{H + 0.1}\big)",
    reads=("ref_logp", "entropy"), logs=SAFE_LOGS)
def safe(forward, batch, *, agg="token-mean", denom=None, coef=0.1, threshold=0.45, kl_short_prev=0.0,
         kl_short_decay=0.9, entropy_floor=2.0, entropy_coef=0.01, reference_bug=False):
    """SAFE's total loss minus the PPO and value terms: `safe-kl-control`'s penalty - entropy_coef agg(H_t).

    entropy_coef 0.01 from `configs/base.yaml`; the bonus uses the training forward's entropy (with gradient)
    aggregated with the recipe's mode (the reference: a plain mean over the response positions, padding
    included). Same parameters, reading and reference_bug as `safe-kl-control`.
    """
    if entropy_coef < 0:
        raise ValueError(f"entropy_coef must be >= 0, got {entropy_coef}")
    penalty, metrics = safe_penalty(forward, batch, coef=coef, kl_short_decay=kl_short_decay,
                                    entropy_floor=entropy_floor, threshold=threshold, kl_short_prev=kl_short_prev,
                                    reference_bug=reference_bug)
    return penalty + entropy_bonus(forward.entropy, batch.mask, coef=entropy_coef, agg=agg, denom=denom), metrics
