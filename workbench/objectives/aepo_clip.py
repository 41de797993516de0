"""AEPO's entropy-balanced clipping: high-entropy tokens past the clip keep a (rescaled) gradient.

PPO's clipped branch has value -(1 + eps_high) A and zero gradient. On the high-entropy tokens (top rho of the
batch by entropy) AEPO replaces the constant by a stop-gradient form with the same value:

    F(r) = (1 + eps_high) r / sg(r)        value 1 + eps_high,  gradient (1 + eps_high) grad log pi
    l_t  = -A_t F(r_t)   where t is high-entropy, A_t > 0 and r_t > 1 + eps_high;   PPO-clip everywhere else

so the forward loss is exactly `ppo-clip`'s and only the gradient of those tokens changes ("preserve and properly
rescale gradients on high-entropy tokens"). The paper is abstract-only here; the form (GPPO-type, upper clip
only by default) is the catalog's reading. Its advantage half is `advantages/aepo_clip.py`.
"""
from __future__ import annotations

import torch

from workbench import ops, registry
from workbench.advantages.aepo_clip import AEPO_TITLE
from workbench.batch import RolloutBatch
from workbench.masks.token_masks import high_entropy_mask
from workbench.objectives.ppo import CLIP_LOGS, check_inputs, clip_metrics, ppo_clip_per_token


def high_entropy_tokens(entropy: torch.Tensor, mask: torch.Tensor, rho: float) -> torch.Tensor:
    """[B, T] bool: the valid tokens with H_t >= the (1 - rho) quantile of the valid entropies (`high-entropy-mask`)."""
    view = RolloutBatch(response_ids=torch.zeros(mask.shape, dtype=torch.long), mask=mask,
                        group=torch.zeros(mask.shape[0], dtype=torch.long), entropy=entropy.detach())
    return high_entropy_mask(view, top_entropy_quantile=rho) > 0


def gradient_preserving(logp: torch.Tensor, old_logp: torch.Tensor, bound: float) -> torch.Tensor:
    """bound * r / sg(r) [B, T], written bound * exp(log r - sg(log r)): value exactly `bound`, gradient
    bound * grad log pi, and no 0 / 0 where r underflows."""
    log_r = logp - old_logp
    return bound * torch.exp(log_r - log_r.detach())


AEPO_CLIP_LOGS = {
    "aepo_clip/preserved_frac": ("AEPO: share of tokens past the clip whose gradient the stop-gradient form keeps.",
                                 "0 on the first minibatch (r = 1); at most clip/high (0 to 0.02 on the smoke run)."),
    "aepo_clip/high_entropy_frac": ("AEPO: share of tokens in the high-entropy set (top rho by entropy).",
                                    "About rho = 0.2 (ties add to it). Far above: the entropies are all alike."),
}


@registry.objective(
    "aepo-agentic-clip", title=AEPO_TITLE,
    summary="PPO-clip whose clipped high-entropy tokens (top 20 % by entropy, A > 0, r > 1 + eps_high) keep the "
            "clipped value but a gradient (1 + eps_high) grad log pi through a stop-gradient ratio.",
    equation=r"\ell_t = -A_t\,(1+\epsilon_{high})\frac{r_t}{\mathrm{sg}(r_t)}\ \text{if}\ H_t \ge Q_{1-\rho}(H),\ "
             r"A_t>0,\ r_t>1+\epsilon_{high};\ \ \ell_t = \ell^{\mathrm{PPO}}_t\ \text{otherwise}",
    reads=("entropy",), logs={**CLIP_LOGS, **AEPO_CLIP_LOGS})
def aepo_agentic_clip(logp, old_logp, advantages, mask, *, entropy, agg="token-mean", denom=None, eps_low=0.2,
                      eps_high=0.2, top_entropy_quantile=0.2, preserve_low=False, logr_clamp=None):
    """Entropy-balanced clipping. `entropy` [B, T]: the batch's detached token entropy (`batch.entropy`).

    Our reading (abstract-only; catalog "decide"): the high-entropy set is the top rho = 0.2 of the valid tokens
    of the minibatch by entropy, the quantile of `high-entropy-mask`; gradient preservation acts on the upper clip
    (A > 0, r > 1 + eps_high) only, the side that blocks exploration; preserve_low=True also preserves the lower
    clip (A < 0, r < 1 - eps_low) with (1 - eps_low) r / sg(r). eps 0.2 / 0.2 as `ppo-clip` (the paper's values
    are not given in the abstract). Forward values equal `ppo-clip` everywhere.

    Metrics: PPO clip fractions plus `aepo_clip/preserved_frac` (share of valid tokens whose clipped gradient is kept)
    and `aepo_clip/high_entropy_frac` (share of valid tokens in the high-entropy set).
    """
    if not (0 <= eps_low < 1 and eps_high >= 0):
        raise ValueError(f"need 0 <= eps_low < 1 and eps_high >= 0, got eps_low={eps_low}, eps_high={eps_high}")
    if not 0 < top_entropy_quantile <= 1:
        raise ValueError(f"top_entropy_quantile must be in (0, 1], got {top_entropy_quantile}")
    check_inputs(logp, old_logp, advantages, mask)
    if entropy.shape != logp.shape:
        raise ValueError(f"entropy has shape {tuple(entropy.shape)} but logp has shape {tuple(logp.shape)}")
    old = old_logp.detach()
    per_token, r, _ = ppo_clip_per_token(logp, old, advantages, eps_low=eps_low, eps_high=eps_high,
                                         logr_clamp=logr_clamp)
    high = high_entropy_tokens(entropy, mask, top_entropy_quantile)          # [B, T]
    upper = high & (advantages > 0) & (r.detach() > 1 + eps_high)
    per_token = torch.where(upper, -advantages * gradient_preserving(logp, old, 1 + eps_high), per_token)
    preserved = upper
    if preserve_low:
        lower = high & (advantages < 0) & (r.detach() < 1 - eps_low)
        per_token = torch.where(lower, -advantages * gradient_preserving(logp, old, 1 - eps_low), per_token)
        preserved = upper | lower
    loss = ops.aggregate(per_token, mask, agg, denom)
    metrics = clip_metrics(r.detach(), advantages, mask, eps_low, eps_high)
    metrics["aepo_clip/preserved_frac"] = float(ops.masked_mean(preserved.to(mask.dtype), mask))
    metrics["aepo_clip/high_entropy_frac"] = float(ops.masked_mean(high.to(mask.dtype), mask))
    return loss, metrics
