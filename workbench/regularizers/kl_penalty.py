"""KL to a frozen reference, in the loss (GRPO family) or in the reward (PPO/RLOO); the adaptive beta is a
controller (workbench/controllers/adaptive_kl.py)."""
from __future__ import annotations

import torch

from workbench import kl, ops, registry
from workbench.objectives.sequence import importance_ratio


def kl_in_loss(logp, ref_logp, mask, *, beta=0.0, estimator="k3", agg="token-mean", denom=None, value_clamp=None,
               is_ratio=None):
    """Loss term beta * agg(k_t) and the mean per-token estimate (for logging).

    value_clamp bounds each k_t (OpenRLHF: 10; verl `low_var_kl`: 10 for k3; TRL: none). `is_ratio` ([B, T]
    or [B, 1], with its gradient) multiplies k_t: TRL's `use_bias_correction_kl`, which corrects the estimate
    for samples drawn from pi_old rather than pi.
    """
    per_token = kl.estimate(logp, ref_logp, estimator, value_clamp=value_clamp)
    if is_ratio is not None:
        per_token = per_token * is_ratio
    value = ops.masked_mean(per_token.detach(), mask)
    if beta == 0:
        return logp.new_zeros(()), value
    return beta * ops.aggregate(per_token, mask, agg, denom), value


def kl_in_reward(logp, ref_logp, mask, *, beta, estimator="k1", value_clamp=None) -> torch.Tensor:
    """Per-token reward penalty -beta * k_t [B, T] (TRL PPO/RLOO, verl `use_kl_in_reward`); no gradient.

    value_clamp bounds each k_t (OpenRLHF `compute_reward`: 10).
    """
    with torch.no_grad():
        return -beta * kl.estimate(logp, ref_logp, estimator, value_clamp=value_clamp) * mask


@registry.regularizer(
    "kl-penalty", title="Fine-Tuning Language Models from Human Preferences",
    summary="beta * KL(pi || ref) added to the loss (GRPO); its reward placement is the reward shaping "
            "`kl-in-reward` (PPO, RLOO).",
    equation=r"\text{loss: } L \mathrel{+}= \beta\,\mathrm{agg}(k_t);\quad \text{reward: } r_t \leftarrow r_t - \beta k_t",
    reads=("ref_logp", "old_logp"), coefficients={"kl_coef": "beta"},
    kl_estimator="estimator", choices={"estimator": kl.KINDS})
def kl_penalty(forward, batch, *, agg="token-mean", denom=None, beta=0.0, estimator="k3", value_clamp=None,
               bias_correction=None):
    """`kl_in_loss` of the training forward's log-probs against `batch.ref_logp` on `batch.mask`.

    bias_correction: None (default; verl, OpenRLHF, TRL < 0.26), or "token" / "sequence": k_t times the
    importance ratio pi/pi_old at that level, gradient included (TRL's `use_bias_correction_kl=True`, its
    default since 1.x, with `importance_sampling_level`). It changes the gradient even on-policy (r = 1):
    d(k r) = dk + k dlog pi.
    """
    is_ratio = None
    if bias_correction is not None:
        is_ratio = importance_ratio(forward.logp, batch.old_logp.detach(), batch.mask, bias_correction)
    loss, _ = kl_in_loss(forward.logp, batch.ref_logp, batch.mask, beta=beta, estimator=estimator, agg=agg,
                         denom=denom, value_clamp=value_clamp, is_ratio=is_ratio)
    return loss, {}
