"""RL-PLUS's hybrid loss: the policy's own tokens by the unclipped ratio, external tokens by a bounded Multiple
Importance Sampling ratio times an exploration-based advantage.

    on-policy tokens (offpolicy_mask = 0):  l_t = -A r_t,   r_t = pi_theta(y_t) / pi_old(y_t), no clip
    external tokens  (offpolicy_mask = 1):  l_t = -off_ratio_t A^c_t
        off_ratio_t = 2 pi_theta(e_t) / (pi_old(e_t) + omega_t),   omega_t = (pi_old(e_t) + 1) / 2
                    = 4 pi_theta(e_t) / (3 pi_old(e_t) + 1)        in [0, 4]; 4p / (3p + 1) <= 1 at pi_theta = pi_old
        A^c_t       = A (1 - sg(pi_theta(e_t)))^gamma, gamma = 0.5   exploration weight: 1 at pi = 0, 0 at pi = 1
    "no_reshape" mode (the reference's other strategy): l_t = -pi_theta(e_t) A on external tokens, no weight

The paper's MIS ratio (as the catalog card gives it; not re-read here) is pi_theta(e_t) / (1/2 pi_old(e_t) +
1/2 pi_omega(e_t)), a balance heuristic over the two policies behind the group's samples; the external policy pi_omega
is unknown, and the code stands in omega = (pi_old + 1) / 2 for it (our reading: the midpoint between the current
policy and a demonstrator sure of its token).
The ratio stays finite where pi_old(e_t) ~ 0 (a plain pi_theta / pi_old would explode on the very tokens the policy
cannot produce) and its gradient w.r.t. log pi_theta is the ratio itself: d l_t / d log pi_theta = -off_ratio_t A^c_t.
The exploration weight, detached, raises the advantage of external tokens the policy finds unlikely and fades on those
it has already learnt. pi_old on external tokens is the policy before this update (the trainer's old_logp), as in the
reference, where the actor recomputes old_log_probs for every row, the demonstration included (`rlplus_trainer.py`
L496-499).

Reference: YihongDong/RL-PLUS @ eb4aa4d4e2d7ce206056f9d7740138bfc94fad8f,
`rl_plus/verl/verl/recipe/rlplus_core_alg.py::compute_token_on_off_policy_loss` (L69-212): on-policy loss L111-128
(`loss_remove_clip=True`: L116, L127), MIS ratio L135-137, exploration-based advantage L164-167, mixing L175-176,
aggregation L194-198; called from `rlplus_actor.py::update_policy` (L144-163) with `off_policy_strategy="RL-PLUS"`
(`exp_scripts/train_RL-PLUS.sh` L9, L82). The advantage is `advantage:rl-plus`.

Differences from the reference:
  - Aggregation is the pipeline's (`seq-mean-token-sum-norm` in the recipe, sum / (B_step L_max)). The reference's
    `loss_remove_token_mean=True` divides each micro-batch's token sum by L_max only (L195), summed over micro-batches
    and averaged over the 8 GPUs: a constant B_step / 8 times ours (64 with the script's 512-row mini-batches).
    Adam absorbs a constant factor except through its eps and the gradient-norm clip.
  - 1 - pi_theta is clamped at 0 before the power: a log-prob rounded above 0 would give (negative)^gamma = NaN.
  - No `off_max_clip` / `off_min_clip` / `all_max_clip` / `target_probs` (all off in the script: config defaults -1,
    `use_off_policy_probs=False`), no PPO clip branch (`loss_remove_clip=True`, L86 of the script; LUFFY's clipped
    variant is `objective:policy-shaping`).
  - Metrics: the reference replaces a NaN `off_ratio_mean` / `off_policy_prob` by 0 when a micro-batch has no external
    token (0/0); ours are 0 there by construction. Its `ppo_kl` averages over every token, the external ones included;
    our kl/k1_old and ratio/* are over the on-policy tokens, the only ones whose ratio the loss uses.
"""
from __future__ import annotations

import math

import torch

from workbench import ops, registry
from workbench.advantages.rl_plus import RL_PLUS_TITLE
from workbench.objectives.policy_shaping import SHAPING_LOGS
from workbench.objectives.ppo import CLIP_LOGS, check_inputs, clip_metrics, ratio

OFF_RATIOS = ("mis", "no_reshape")  # the reference's off_policy_strategy "RL-PLUS" and "no_reshape"
RATIO_METRICS = ("ratio/mean", "ratio/max", "kl/k1_old", "kl/k3_old")  # of `clip_metrics`: there is no clip here


def check_rl_plus(*, gamma=0.5, off_ratio="mis", **_) -> None:
    """The exploration exponent: a finite gamma >= 0 (0 turns the weight off, A^c = A)."""
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not math.isfinite(gamma) or gamma < 0:
        raise ValueError(f"gamma={gamma!r}: the exponent of the exploration weight (1 - pi_theta)^gamma must be a "
                         "finite number >= 0 (RL-PLUS uses 0.5; 0 turns the weight off, A^c = A)")
    if off_ratio not in OFF_RATIOS:
        raise ValueError(f"off_ratio must be one of {OFF_RATIOS} (the reference's 'RL-PLUS' and 'no_reshape'), got "
                         f"{off_ratio!r}")


def mis_ratio(logp: torch.Tensor, old_logp: torch.Tensor) -> torch.Tensor:
    """off_ratio = 2 pi_theta / (pi_old + omega), omega = (pi_old + 1) / 2, [B, T]; old_logp carries no gradient.
    Written as the reference (L136-137) writes it, not as the equal 4 pi / (3 pi_old + 1)."""
    p_old = torch.exp(old_logp)
    omega = 0.5 * (p_old + 1)
    return 2 * torch.exp(logp) / (p_old + omega)


def exploration_weight(logp: torch.Tensor, gamma: float) -> torch.Tensor:
    """C_t = (1 - sg(pi_theta))^gamma [B, T]: a weight on the advantage, not a path for the gradient (L165-166)."""
    return (1 - torch.exp(logp.detach())).clamp(min=0) ** gamma


def external_per_token(logp, old_logp, advantages, *, gamma, off_ratio):
    """(l_t [B, T] of the external-token branch, its ratio [B, T], its weight on A [B, T])."""
    if off_ratio == "no_reshape":  # L132-134 and L169: pi_theta as the ratio, the plain advantage
        w = torch.exp(logp)
        return -w * advantages, w, torch.ones_like(advantages)
    w, c = mis_ratio(logp, old_logp), exploration_weight(logp, gamma)
    return -w * (advantages * c), w, c


RL_PLUS_LOGS = {
    "rlplus/off_ratio": (
        "RL-PLUS: mean MIS ratio 4 pi_theta / (3 pi_old + 1) over the external (demonstration) tokens.",
        ("In [0, 1] on the first minibatch (4p/(3p+1)), rising towards 1 as the policy learns the demonstrations. "
         "0: no external token; stuck near 0: they stay unreachable.")),
    "rlplus/exploration_weight": (
        "RL-PLUS: mean exploration weight (1 - pi_theta)^gamma over the external tokens.",
        ("Near 1 early (demonstration tokens are unlikely), falling as they are learnt. Near 0: the demonstrations "
         "are memorised and give no more gradient.")),
}


@registry.objective(
    "rl-plus", title=RL_PLUS_TITLE,
    summary="Unclipped -A r on the policy's own tokens; on external tokens -A (1 - sg pi)^0.5 times the Multiple "
            "Importance Sampling ratio 2 pi / (pi_old + (pi_old + 1)/2), bounded by 4 and finite at pi_old = 0.",
    equation=r"\ell_t = -r_t A\ \ (t\ \text{on-policy}),\qquad \ell_t = -\frac{2\pi_\theta(e_t)}{\pi_{old}(e_t) + "
             r"\frac{1}{2}(\pi_{old}(e_t) + 1)}\,A\,\big(1 - \mathrm{sg}\,\pi_\theta(e_t)\big)^{\gamma}\ \ "
             r"(t\ \text{external})",
    reads=("offpolicy_mask",), logs={**{k: CLIP_LOGS[k] for k in RATIO_METRICS}, **SHAPING_LOGS, **RL_PLUS_LOGS},
    choices={"off_ratio": OFF_RATIOS}, check=check_rl_plus)
def rl_plus(logp, old_logp, advantages, mask, *, offpolicy_mask, agg="token-mean", denom=None, gamma=0.5,
            off_ratio="mis", logr_clamp=None):
    """Reads `offpolicy_mask` [B, T] (1 on external tokens). Defaults: gamma = 0.5 (L166's `**(0.5)`, the paper's
    gamma), off_ratio "mis" (`off_policy_strategy="RL-PLUS"`); "no_reshape" is the reference's other strategy.
    logr_clamp: None (the reference does not clamp the on-policy log-ratio). No external token: exactly the
    unclipped ratio loss -A r.

    Metrics: ratio/mean, ratio/max, kl/k1_old, kl/k3_old over the on-policy tokens (over all tokens when a minibatch
    has none); `shaping/offpolicy_frac` (share of valid tokens that are external), `shaping/offpolicy_prob` (their
    mean pi_theta, the reference's `off_policy_prob`), `rlplus/off_ratio` (the reference's `off_ratio_mean`),
    `rlplus/exploration_weight` (mean (1 - pi_theta)^gamma); the last three 0 without external tokens.
    """
    check_rl_plus(gamma=gamma, off_ratio=off_ratio)
    check_inputs(logp, old_logp, advantages, mask)
    if offpolicy_mask.shape != logp.shape:
        raise ValueError(f"offpolicy_mask has shape {tuple(offpolicy_mask.shape)} but logp has shape "
                         f"{tuple(logp.shape)}")
    old = old_logp.detach()
    off = offpolicy_mask > 0                                                            # [B, T]
    r = ratio(logp, old, logr_clamp)                                                    # [B, T]
    off_loss, w, c = external_per_token(logp, old, advantages, gamma=gamma, off_ratio=off_ratio)
    per_token = torch.where(off, off_loss, -advantages * r)                             # [B, T]
    loss = ops.aggregate(per_token, mask, agg, denom)
    on_mask, off_mask = mask * (~off).to(mask.dtype), mask * off.to(mask.dtype)
    # the eps of clip_metrics only sets clip/* fractions, which are dropped: nothing is clipped here
    ratios = clip_metrics(r.detach(), advantages, on_mask if bool(on_mask.any()) else mask, 0.2, 0.2)
    metrics = {k: ratios[k] for k in RATIO_METRICS}
    with torch.no_grad():
        has_off = bool(off_mask.any())
        metrics["shaping/offpolicy_frac"] = float(ops.masked_mean(off.to(mask.dtype), mask))
        for name, x in (("shaping/offpolicy_prob", torch.exp(logp)), ("rlplus/off_ratio", w),
                        ("rlplus/exploration_weight", c)):
            metrics[name] = float(ops.masked_mean(x, off_mask)) if has_off else 0.0
    return loss, metrics
