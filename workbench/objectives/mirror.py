"""MDPO: mirror-descent policy optimization, a KL-proximal surrogate instead of ratio clipping.

    maximize  J_k(theta) = E_{pi_k}[r A] - (1/t_k) E_s[KL(pi_theta(.|s) || pi_k(.|s))]      (reverse KL)
    per token l_t = -r_t A_t + (1/t_k) KL_t,   r_t = exp(logp - old),   no clipping
    KL_t: exact full-vocabulary KL(pi_theta || pi_k) from the two logit tensors (`full_vocab_kl`),
          or the sampled k2 = (logp - old)^2 / 2 (same gradient on-policy)
    t_k = 1 - (k - 1)/K  (reference code, k = 0-based iteration), so 1/t_k grows over training

Reference: manantomar/Mirror-Descent-Policy-Optimization `mdpo_on/mdpo.py`
(`surrgain = mean(ratio * atarg) - meankl / lr_now`, `kloldnew = pi.kl(old_pi)`,
`lr_now = 1.0 - (iters_so_far - 1.0) / n_updates`, `sgd_steps=5`, `lam=0.98`, advantages standardized).
`mdpo` is a recipe key in the catalog: these are plain functions the recipe composes.
"""
from __future__ import annotations

import torch

from workbench import kl as kl_estimators
from workbench import ops, registry
from workbench.objectives.ppo import CLIP_LOGS, check_inputs, ratio


def full_vocab_kl(logits_p: torch.Tensor, logits_q: torch.Tensor, *, temperature: float = 1.0,
                  chunk: int = 128) -> torch.Tensor:
    """KL(p || q) = sum_v p_v (log p_v - log q_v) per position; logits [..., V] -> [...].

    Logits are divided by `temperature` first; computed in at least float32 (float64 stays float64),
    chunked over positions. Gradients flow into both arguments: pass `logits_q.detach()` for a fixed q
    (MDPO's pi_k).
    """
    if logits_p.shape != logits_q.shape:
        raise ValueError(f"logits shapes differ: {tuple(logits_p.shape)} vs {tuple(logits_q.shape)}")
    dtype = torch.promote_types(logits_p.dtype, torch.float32)
    V = logits_p.shape[-1]
    p_flat, q_flat = logits_p.reshape(-1, V), logits_q.reshape(-1, V)
    out = []
    for start in range(0, p_flat.shape[0], chunk):
        s = slice(start, start + chunk)
        lp = torch.log_softmax(p_flat[s].to(dtype) / temperature, -1)
        lq = torch.log_softmax(q_flat[s].to(dtype) / temperature, -1)
        out.append((lp.exp() * (lp - lq)).sum(-1))
    if not out:
        return logits_p.new_zeros(logits_p.shape[:-1], dtype=dtype)
    return torch.cat(out).reshape(logits_p.shape[:-1])


def check_mdpo(*, inv_t=1.0, **_) -> None:
    if inv_t < 0:
        raise ValueError(f"inv_t = 1/t_k must be >= 0, got {inv_t}")


def mdpo_surrogate(logp, old_logp, advantages, mask, *, inv_t, kl_per_token=None, agg="token-mean",
                   denom=None, logr_clamp=None):
    """MDPO loss: aggregate of l_t = -r_t A_t + inv_t KL_t, no clipping; returns (loss, metrics).

    inv_t = 1/t_k (see `workbench.schedules.mdpo.mdpo_inv_t`). kl_per_token [B, T]: the exact per-position
    `full_vocab_kl(logits, old_logits.detach())` (the reference's reverse KL(pi_theta || pi_k)), or None
    for the sampled k2 = (logp - old)^2 / 2 (`workbench.kl.k2`). At theta = theta_k both the KL and its
    gradient vanish, so the first inner step is the unclipped ratio policy gradient; inv_t = 0 is the
    unclipped surrogate -r A. old_logp is detached. Metrics: `mdpo/kl` (mean KL_t), `mdpo/inv_t`,
    `mdpo/surrogate` (mean r A), `kl/k1_old`, `ratio/mean`, `ratio/max`.
    """
    check_mdpo(inv_t=inv_t)
    check_inputs(logp, old_logp, advantages, mask)
    old = old_logp.detach()
    if kl_per_token is None:
        kl_per_token = kl_estimators.k2(logp, old)
    elif kl_per_token.shape != logp.shape:
        raise ValueError(f"kl_per_token has shape {tuple(kl_per_token.shape)} but logp has shape "
                         f"{tuple(logp.shape)}")
    r = ratio(logp, old, logr_clamp)
    per_token = -advantages * r + inv_t * kl_per_token
    loss = ops.aggregate(per_token, mask, agg, denom)
    with torch.no_grad():
        metrics = {
            "mdpo/kl": float(ops.masked_mean(kl_per_token, mask)),
            "mdpo/inv_t": float(inv_t),
            "mdpo/surrogate": float(ops.masked_mean(r * advantages, mask)),
            "kl/k1_old": float(ops.masked_mean(old - logp, mask)),
            "ratio/mean": float(ops.masked_mean(r, mask)),
            "ratio/max": float((r * mask).max()),
        }
    return loss, metrics


MDPO_LOGS = {
    "mdpo/kl": ("MDPO: mean per-token KL(pi || pi_old) estimate (k2) inside the loss.",
                "0 on the first minibatch after a rollout, then of the order of kl/k3_old (about 1e-3 on the smoke "
                "run). Growing while mdpo/inv_t grows: the proximity term is not holding the step back."),
    "mdpo/inv_t": ("MDPO: the KL weight 1/t_k at this step (grows over training).",
                   "Follows the schedule exactly: K/(K+1) at step 0 rising to K/2 at the last of K steps (0.91 to 5 "
                   "over 10 steps). Anything else: the schedule is not driving the objective."),
    "mdpo/surrogate": ("MDPO: mean r * A, the unclipped surrogate being maximised.",
                       "About advantage/mean on the first minibatch (r = 1), a little higher on later ones as r "
                       "grows where A > 0. A fast climb together with mdpo/kl: the update is running away from "
                       "pi_old."),
}


@registry.objective(
    "mdpo", title="Mirror Descent Policy Optimization",
    summary="Unclipped ratio surrogate plus (1/t_k) KL(pi_theta || pi_k) to the sampling policy, 1/t_k growing "
            "over training (sampled k2 per token).",
    equation=r"\ell_t = -r_t A_t + \frac{1}{t_k}\,\mathrm{KL}_t(\pi_\theta \,\|\, \pi_k),\quad t_k = 1 - \frac{k-1}{K}",
    logs={**{k: CLIP_LOGS[k] for k in ("ratio/mean", "ratio/max", "kl/k1_old")}, **MDPO_LOGS}, check=check_mdpo)
def mdpo(logp, old_logp, advantages, mask, *, agg="token-mean", denom=None, inv_t=1.0, logr_clamp=None):
    """`mdpo_surrogate` with the sampled k2 KL. In the `mdpo` recipe `inv_t` follows the schedule
    `mdpo-inv-t` (workbench/schedules/mdpo.py); called directly it is the constant given."""
    return mdpo_surrogate(logp, old_logp, advantages, mask, inv_t=inv_t, agg=agg, denom=denom,
                          logr_clamp=logr_clamp)

