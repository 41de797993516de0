"""LUFFY's policy shaping: off-policy (reference / teacher) tokens are trained through f(p) = p / (p + gamma).

    off-policy tokens (offpolicy_mask = 1):  l_t = -A_t f(pi_theta(y_t)),  f(p) = p / (p + gamma)   no ratio, no clip
    on-policy tokens:                        l_t = PPO-clip(r_t, A_t)

d f / d log p = gamma p / (p + gamma)^2: at most 1/4 (at p = gamma), vanishing as p -> 1, where plain grad p would
weigh the token by p and grad log p by 1. Low-probability teacher tokens, the ones the policy would never have
sampled, keep a large gradient instead of being drowned by the confident ones.

Reference: ElliottYan/LUFFY `luffy/verl/verl/mix_src/mix_core_alg.py::compute_token_on_off_policy_loss`,
`off_policy_reshape="p_div_p_0.1"`. The off-policy tokens come from `rollout:policy-shaping`
(`workbench/rollout/offpolicy_guidance.py`).
"""
from __future__ import annotations

import torch

from workbench import ops, registry
from workbench.objectives.ppo import CLIP_LOGS, DUAL_CLIP_LOGS, check_inputs, clip_metrics, ppo_clip_per_token

LUFFY_TITLE = "Learning to Reason under Off-Policy Guidance"


def shaped_probability(logp: torch.Tensor, gamma: float) -> torch.Tensor:
    """f(p) = p / (p + gamma) of p = exp(logp) [B, T] (LUFFY `off_ratio / (off_ratio + 0.1)`)."""
    p = torch.exp(logp)
    return p / (p + gamma)


SHAPING_LOGS = {
    "shaping/offpolicy_frac": ("Policy shaping: share of trained tokens that are off-policy (reference solutions).",
                               "The references' share of tokens (about 0.1 at G = 4 on the smoke run). 0: none "
                               "trained."),
    "shaping/offpolicy_prob": ("Policy shaping: mean pi_theta of the off-policy tokens (LUFFY's off_policy_prob).",
                               "Rises from its start (0.01 untrained) towards 1 as references are learnt; flat: "
                               "stuck."),
}


@registry.objective(
    "policy-shaping", title=LUFFY_TITLE,
    summary="Off-policy tokens trained by -A p/(p + gamma) (gamma = 0.1): no ratio, no clip, gradient weight "
            "gamma p/(p + gamma)^2; on-policy tokens keep PPO-clip.",
    equation=r"\ell_t = -A_t\,\frac{\pi_\theta(y_t)}{\pi_\theta(y_t)+\gamma}\ \ (t\ \text{off-policy}),\qquad "
             r"\ell_t = \ell^{\mathrm{PPO}}_t\ \ \text{otherwise}",
    reads=("offpolicy_mask",), logs={**CLIP_LOGS, **DUAL_CLIP_LOGS, **SHAPING_LOGS})
def policy_shaping(logp, old_logp, advantages, mask, *, offpolicy_mask, agg="token-mean", denom=None, gamma=0.1,
                   eps_low=0.2, eps_high=0.2, dual_clip_c=None, logr_clamp=None):
    """Reads `offpolicy_mask` [B, T] (1 on off-policy tokens). Defaults: gamma = 0.1 (LUFFY's
    `off_policy_reshape="p_div_p_0.1"`, `exp_scripts/train.sh`), PPO-clip 0.2 / 0.2 on on-policy tokens as
    the catalog writes (LUFFY's script removes the on-policy clip, `loss_remove_clip=True`; with one update
    per batch the ratio is 1 and the clip never binds). No off-policy token is exactly `ppo-clip`.
    dual_clip_c: the dual-clip cap -c A on on-policy tokens with A < 0 (ICPO's `compute_icpo_policy_loss`, c = 3;
    None: no cap, LUFFY).

    Metrics: PPO clip fractions over the on-policy tokens (over all tokens when a minibatch has none),
    `shaping/offpolicy_frac` (share of valid tokens that are off-policy), `shaping/offpolicy_prob` (their mean
    pi_theta(y_t), LUFFY's `off_policy_prob`; 0 without any).
    """
    if not gamma > 0:
        raise ValueError(f"gamma must be > 0 (f(p) = p / (p + gamma)), got {gamma}")
    check_inputs(logp, old_logp, advantages, mask)
    if offpolicy_mask.shape != logp.shape:
        raise ValueError(f"offpolicy_mask has shape {tuple(offpolicy_mask.shape)} but logp has shape "
                         f"{tuple(logp.shape)}")
    off = offpolicy_mask > 0
    on_policy, r, dual = ppo_clip_per_token(logp, old_logp.detach(), advantages, eps_low=eps_low, eps_high=eps_high,
                                            dual_clip_c=dual_clip_c, logr_clamp=logr_clamp)
    per_token = torch.where(off, -advantages * shaped_probability(logp, gamma), on_policy)
    loss = ops.aggregate(per_token, mask, agg, denom)
    on_mask = mask * (~off).to(mask.dtype)
    metrics = clip_metrics(r.detach(), advantages, on_mask if bool(on_mask.any()) else mask, eps_low, eps_high, dual)
    off_mask = mask * off.to(mask.dtype)
    with torch.no_grad():
        metrics["shaping/offpolicy_frac"] = float(ops.masked_mean(off.to(mask.dtype), mask))
        metrics["shaping/offpolicy_prob"] = (float(ops.masked_mean(torch.exp(logp), off_mask))
                                             if bool(off_mask.any()) else 0.0)
    return loss, metrics
