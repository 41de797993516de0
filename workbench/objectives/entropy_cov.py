"""Clip-Cov and KL-Cov: entropy control through the tokens with the largest logp-advantage covariance.

Under policy gradient the entropy change is about -Cov(logp, A): confident tokens with high advantage
collapse entropy. Both methods act on the per-token centred product over the valid tokens

    cov_t = (A_t - mean_m A) (sg(logp_t) - mean_m sg(logp))

    clip_cov: among valid, not-already-PPO-clipped tokens with lb < cov_t < ub, pick
              k = max(int(ratio N), 1) uniformly at random and multiply their PPO loss by 0 (no gradient)
    kl_cov:   on the top-k tokens by cov_t (k = max(1, int(N ratio))): l = -A r + coef |logp - old|;
              all other tokens: l = -A r (no ratio clipping anywhere)

Reference: verl `core_algos.py::compute_policy_loss_clip_cov` / `compute_policy_loss_kl_cov` (adapted from
PRIME-RL/Entropy-Mechanism-of-RL). Means are over the valid tokens of the tensors passed in (verl: the
micro-batch). Random selection uses an explicit `torch.Generator` (verl: global `torch.randperm`).
"""
from __future__ import annotations

import torch

from workbench import ops, registry
from workbench.objectives.ppo import CLIP_LOGS, check_inputs, clip_metrics, ppo_clip_per_token, ratio

ENTROPY_TITLE = "The Entropy Mechanism of Reinforcement Learning for Reasoning Language Models"


def token_covariance(logp, advantages, mask) -> torch.Tensor:
    """Detached cov_t = (A_t - mean_m A)(logp_t - mean_m logp), [B, T]; -inf where mask == 0."""
    ops.check_mask(logp, mask, "logp")
    with torch.no_grad():
        lp, adv = logp.detach(), advantages.detach()
        cov = (adv - ops.masked_mean(adv, mask)) * (lp - ops.masked_mean(lp, mask))
        return cov.masked_fill(mask <= 0, float("-inf"))


def _generator(seed, generator) -> torch.Generator:
    return generator if generator is not None else torch.Generator().manual_seed(int(seed))


def check_clip_cov(*, clip_cov_ratio=2e-4, clip_cov_lb=1.0, clip_cov_ub=5.0, **_) -> None:
    if clip_cov_ratio < 0:
        raise ValueError(f"clip_cov_ratio must be >= 0, got {clip_cov_ratio}")
    if not clip_cov_lb < clip_cov_ub:
        raise ValueError(f"need clip_cov_lb < clip_cov_ub, got {clip_cov_lb}, {clip_cov_ub}")


def clip_cov_selection(logp, old_logp, advantages, mask, *, clip_cov_ratio=2e-4, clip_cov_lb=1.0,
                       clip_cov_ub=5.0, eps_low=0.2, eps_high=0.2, min_one=True, seed=0, generator=None,
                       logr_clamp=None):
    """(detached [B, T] bool, candidates [B, T] bool): the tokens clip_cov removes from the gradient.

    candidates = valid & lb < cov < ub & not clipped by PPO (the clipped branch is active:
    A > 0 and r > 1 + eps_high, or A < 0 and r < 1 - eps_low); k = int(ratio N_valid), raised to 1 when
    `min_one` (verl `max(int(ratio N), 1)`, which detaches one token even at ratio 0); exactly
    min(k, #candidates) candidates are detached, chosen by `torch.randperm(#candidates, generator=g)`
    in row-major candidate order (verl's `torch.nonzero` order).
    """
    check_clip_cov(clip_cov_ratio=clip_cov_ratio, clip_cov_lb=clip_cov_lb, clip_cov_ub=clip_cov_ub)
    cov = token_covariance(logp, advantages, mask)
    with torch.no_grad():
        r = ratio(logp.detach(), old_logp.detach(), logr_clamp)
        clipped = ((r > 1 + eps_high) & (advantages > 0)) | ((r < 1 - eps_low) & (advantages < 0))
        candidates = (mask > 0) & ~clipped & (cov > clip_cov_lb) & (cov < clip_cov_ub)
        k = int(clip_cov_ratio * float(mask.sum()))
        if min_one:
            k = max(k, 1)
        idx = torch.nonzero(candidates)
        detached = torch.zeros_like(candidates)
        if len(idx) > 0 and k > 0:
            perm = torch.randperm(len(idx), generator=_generator(seed, generator))
            chosen = idx[perm[: min(k, len(idx))]]
            detached[chosen[:, 0], chosen[:, 1]] = True
    return detached, candidates


CLIP_COV_LOGS = {
    "clip_cov/detached": ("Clip-Cov: number of tokens whose gradient was detached per minibatch (averaged over the "
                          "step's optimizer steps).",
                          "Fixed by construction: max(1, int(2e-4 N)) per minibatch given enough candidates, so 1 on "
                          "small batches. 0: no token fell in the covariance band (see clip_cov/candidate_frac)."),
    "clip_cov/detached_frac": ("Clip-Cov: fraction of valid tokens detached (high covariance band, random subset).",
                               "About clip_cov_ratio (2e-4) on large batches, 1/N on small ones (0.002 on the smoke "
                               "run). Not a health signal itself: watch entropy, which Clip-Cov keeps from "
                               "collapsing."),
    "clip_cov/candidate_frac": ("Clip-Cov: fraction of valid tokens inside the covariance band (candidates).",
                                "A few percent (2 to 5% on the smoke run), at least clip_cov/detached_frac. Near 0: "
                                "no token has a covariance in (lb, ub), so Clip-Cov is plain PPO-clip."),
}


@registry.objective(
    "clip_cov", title=ENTROPY_TITLE,
    summary="PPO-clip with a random subset of high-covariance tokens (lb < cov < ub) detached: their "
            "loss is multiplied by 0. Slows entropy collapse.",
    equation=r"\ell_t = \max\big(-r_tA_t, -\mathrm{clip}(r_t)A_t\big)\cdot c_t,\ "
             r"c_t = 0 \text{ on } k \text{ random tokens with } lb < (A_t-\bar A)(\log\pi_t-\overline{\log\pi}) < ub",
    logs={**CLIP_LOGS, **CLIP_COV_LOGS}, check=check_clip_cov)
def clip_cov(logp, old_logp, advantages, mask, *, agg="token-mean", denom=None, eps_low=0.2, eps_high=0.2,
             clip_cov_ratio=2e-4, clip_cov_lb=1.0, clip_cov_ub=5.0, min_one=True, seed=0, generator=None,
             logr_clamp=None):
    """Clip-Cov. Defaults are verl's (`actor.yaml` policy_loss: clip_cov_ratio 2e-4, lb 1.0, ub 5.0; PPO
    clip 0.2/0.2). SPEAR uses ratio 0.02, lb 1, ub 40 (ALFWorld script lb 2 / ub 60).

    Randomness: `generator` (a torch.Generator, advanced in place; pass one persistent generator in a
    training loop) or, when None, a fresh generator seeded with `seed` (same inputs -> same selection).
    Detached tokens keep counting in the aggregation denominator (their loss is 0, as in verl).
    `min_one=False` with ratio 0 is exactly `ppo-clip`; verl's max(., 1) (min_one=True) detaches one
    candidate even then. Metrics: PPO clip fractions plus `clip_cov/detached_frac` (verl `pg_clipfrac`
    for this loss), `clip_cov/candidate_frac`, `clip_cov/detached` (count).
    """
    check_inputs(logp, old_logp, advantages, mask)
    old = old_logp.detach()
    detached, candidates = clip_cov_selection(
        logp, old, advantages, mask, clip_cov_ratio=clip_cov_ratio, clip_cov_lb=clip_cov_lb,
        clip_cov_ub=clip_cov_ub, eps_low=eps_low, eps_high=eps_high, min_one=min_one, seed=seed,
        generator=generator, logr_clamp=logr_clamp)
    per_token, r, _ = ppo_clip_per_token(logp, old, advantages, eps_low=eps_low, eps_high=eps_high,
                                         logr_clamp=logr_clamp)
    corr = (~detached).to(per_token.dtype)
    loss = ops.aggregate(per_token * corr, mask, agg, denom)
    metrics = clip_metrics(r.detach(), advantages, mask, eps_low, eps_high)
    metrics["clip_cov/detached_frac"] = float(ops.masked_mean(detached.to(mask.dtype), mask))
    metrics["clip_cov/candidate_frac"] = float(ops.masked_mean(candidates.to(mask.dtype), mask))
    metrics["clip_cov/detached"] = float(detached.sum())
    return loss, metrics


def check_kl_cov(*, kl_cov_ratio=2e-4, **_) -> None:
    if kl_cov_ratio < 0:
        raise ValueError(f"kl_cov_ratio must be >= 0, got {kl_cov_ratio}")


def kl_cov_selection(logp, advantages, mask, *, kl_cov_ratio=2e-4, min_one=True) -> torch.Tensor:
    """[B, T] bool: the top-k valid tokens by cov_t, k = int(N_valid ratio) raised to 1 when `min_one`
    and ratio > 0 (verl: `max(1, int(N ratio))`, and no penalty at all when ratio == 0)."""
    check_kl_cov(kl_cov_ratio=kl_cov_ratio)
    cov = token_covariance(logp, advantages, mask)
    n = int(mask.sum())
    k = int(n * kl_cov_ratio)
    if min_one and kl_cov_ratio > 0:
        k = max(k, 1)
    k = min(k, n)
    selected = torch.zeros(mask.shape, dtype=torch.bool)
    if k > 0:
        top = torch.topk(cov.flatten(), k, largest=True).indices
        selected.view(-1)[top] = True
    return selected


KL_COV_LOGS = {
    "kl/abs_old": ("Mean |logp - old_logp|: drift from the sampling policy, sign ignored.",
                   "0 on the first minibatch after a rollout, a few thousandths on average (smoke run). Growing: the "
                   "unclipped KL-Cov surrogate moves too far per batch (lower lr or raise ppo_kl_coef)."),
    "kl_cov/penalized": ("KL-Cov: number of top-covariance tokens given the |logp - old| penalty per minibatch "
                         "(averaged over the step's optimizer steps).",
                         "Fixed by construction: max(1, int(kl_cov_ratio N)) top-covariance tokens per minibatch, 1 "
                         "on small batches. A change means the batch size changed, not the policy."),
    "kl_cov/penalized_frac": ("KL-Cov: fraction of valid tokens penalized.",
                              "About kl_cov_ratio (2e-4) on large batches, 1/N on small ones (0.002 on the smoke "
                              "run). Judge the effect on entropy and kl/abs_old, not on this share."),
}


@registry.objective(
    "kl_cov", title=ENTROPY_TITLE,
    summary="Unclipped surrogate -A r plus coef |logp - old| on the top-k tokens by logp-advantage "
            "covariance (k = ratio x valid tokens).",
    equation=r"\ell_t = -A_t r_t + \beta\,|\log\pi_\theta(y_t) - \log\pi_{old}(y_t)|\,"
             r"[t \in \mathrm{top}_k(\mathrm{cov})]",
    logs={**{k: CLIP_LOGS[k] for k in ("ratio/mean", "ratio/max")}, **KL_COV_LOGS}, check=check_kl_cov)
def kl_cov(logp, old_logp, advantages, mask, *, agg="token-mean", denom=None, kl_cov_ratio=2e-4,
           ppo_kl_coef=0.1, min_one=True, logr_clamp=None):
    """KL-Cov. Defaults: kl_cov_ratio 2e-4 and ppo_kl_coef 0.1 from verl `trainer/config/actor/actor.yaml`
    (the function's own fallback for ppo_kl_coef is 1.0; the paper's recipe scripts
    `recipe/entropy/7b_kl_cov.sh` use kl_cov_ratio 2e-3 with ppo_kl_coef 1). No ratio clipping.

    The penalty's gradient is coef * sign(logp - old) on the selected tokens: it pulls logp back toward
    old. Selection is deterministic (torch.topk over the detached covariance). Metrics: `kl/abs_old`
    (verl `actor/ppo_kl` for this loss: mean |logp - old|), `kl_cov/penalized_frac`, `kl_cov/penalized`,
    `ratio/mean`, `ratio/max`.
    """
    check_inputs(logp, old_logp, advantages, mask)
    old = old_logp.detach()
    selected = kl_cov_selection(logp, advantages, mask, kl_cov_ratio=kl_cov_ratio, min_one=min_one)
    r = ratio(logp, old, logr_clamp)
    abs_kl = (logp - old).abs()
    per_token = -advantages * r + ppo_kl_coef * abs_kl * selected.to(r.dtype)
    loss = ops.aggregate(per_token, mask, agg, denom)
    with torch.no_grad():
        metrics = {
            "kl/abs_old": float(ops.masked_mean(abs_kl, mask)),
            "kl_cov/penalized_frac": float(ops.masked_mean(selected.to(mask.dtype), mask)),
            "kl_cov/penalized": float(selected.sum()),
            "ratio/mean": float(ops.masked_mean(r, mask)),
            "ratio/max": float((r * mask).max()),
        }
    return loss, metrics
