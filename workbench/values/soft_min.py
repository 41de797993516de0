"""SAFE's double soft-min critic: two value heads combined pessimistically, trained with a Huber loss.

    V = -alpha (logsumexp(-v1/alpha, -v2/alpha) - log 2)     alpha = 0.3; alpha -> 0: min(v1, v2); -> inf: mean
    L_V = c 1/2 (huber_0.5(V - R) + huber_0.5(V_old + clip(V - V_old, +-0.2) - R))

Reference: ryyzn9/SAFE `safe/models/critic.py` (`DoubleCritic`), `safe/trainers/safe.py` (`train_step`),
`configs/base.yaml`, commit 183daf7a.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from workbench import ops, registry
from workbench.regularizers.safe import SAFE_TITLE
from workbench.values.loss import VALUE_LOGS


def check_safe_value(*, alpha=0.3, delta=0.5, clip_eps=0.2, **_) -> None:
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0, got {alpha}")
    if not delta > 0 or not clip_eps > 0:
        raise ValueError(f"delta and clip_eps must be > 0, got delta={delta}, clip_eps={clip_eps}")


def soft_min(v1: torch.Tensor, v2: torch.Tensor, alpha: float = 0.3) -> torch.Tensor:
    """-alpha (logsumexp(-v1/alpha, -v2/alpha) - log 2): between min(v1, v2) and their mean."""
    check_safe_value(alpha=alpha)
    stacked = torch.stack([-v1 / alpha, -v2 / alpha], dim=-1)
    return -alpha * (torch.logsumexp(stacked, dim=-1) - math.log(2))


class SoftMinValueHead(torch.nn.Module):
    """hidden [B, T, H] -> V [B, T]: LayerNorm, then two MLP heads (H -> H/4 -> GELU -> 1), combined by `soft_min`.

    The reference reads one value per sequence (the last position's hidden state); here, as the workbench's
    `ValueHead`, every response position gets V(s_t). The output layers start at zero (v1 = v2 = V = 0, as
    `ValueHead`), so the critic starts neutral; the reference initialises them at random."""

    def __init__(self, hidden: int, alpha: float = 0.3):
        super().__init__()
        check_safe_value(alpha=alpha)
        self.alpha = alpha
        self.ln = torch.nn.LayerNorm(hidden)
        width = max(hidden // 4, 1)
        self.v1, self.v2 = (torch.nn.Sequential(torch.nn.Linear(hidden, width), torch.nn.GELU(),
                                                torch.nn.Linear(width, 1)) for _ in range(2))
        for head in (self.v1, self.v2):
            torch.nn.init.zeros_(head[-1].weight)
            torch.nn.init.zeros_(head[-1].bias)

    def heads(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.ln(hidden.to(self.ln.weight.dtype))  # bf16 trunk, fp32 head (as ValueHead)
        return self.v1(h).squeeze(-1), self.v2(h).squeeze(-1)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return soft_min(*self.heads(hidden), self.alpha)


def huber_value_loss(values, old_values, returns, mask, *, agg="token-mean", denom=None, delta=0.5, clip_eps=0.2):
    """1/2 (huber(V - R) + huber(V_clip - R)) aggregated over `mask`, V_clip = V_old + clip(V - V_old, +-clip_eps):
    the reference adds the clipped term (PPO's value loss takes the max of the two)."""
    check_safe_value(delta=delta, clip_eps=clip_eps)
    v_clip = old_values + (values - old_values).clamp(-clip_eps, clip_eps)
    per_token = 0.5 * (F.huber_loss(values, returns, reduction="none", delta=delta)
                       + F.huber_loss(v_clip, returns, reduction="none", delta=delta))
    return ops.aggregate(per_token, mask, agg, denom)


@registry.value(
    "safe", title=SAFE_TITLE,
    summary="Double soft-min critic (two MLP heads after LayerNorm, V = soft-min at alpha 0.3) with a Huber "
            "(delta 0.5) value loss plus its clipped twin, weighted 0.5.",
    equation=r"V = -\alpha\big(\mathrm{LSE}(-v_1/\alpha, -v_2/\alpha) - \log 2\big),\ "
             r"L_V = \tfrac{c}{2}\big(\ell_\delta(V - R) + \ell_\delta(V_{old} + \mathrm{clip}(V - V_{old}) - R)\big)",
    reads=("returns", "value_mask", "old_values"),
    logs={k: VALUE_LOGS[k] for k in ("value/loss", "value/mean", "value/explained_var")}, check=check_safe_value)
def safe_value(values, batch, *, agg="token-mean", denom=None, coef=0.5, alpha=0.3, delta=0.5, clip_eps=0.2):
    """coef x `huber_value_loss` of the soft-min head's values [B, T] on the advantage's targets.

    Defaults from `safe/trainers/safe.py` and `configs/base.yaml`: coef 0.5 (loss = ... + 0.5 value_loss),
    alpha_softmin 0.3, Huber delta 0.5, clip_range_vf 0.2. `alpha` configures the head (`safe_value.head`,
    built by the trainer). Our reading: targets come from the recipe's advantage (SAFE: A = R - V whitened,
    i.e. `gae` with gamma = lam = 1 and returns R; its running reward normalization is not ported); the
    reference's Polyak target critic (tau 0.05) is updated but never read by its loss, so it is not kept.
    Metrics: `value/loss`, `value/mean`, `value/explained_var`.
    """
    if batch.value_mask.sum() == 0:
        return values.sum() * 0, {}
    loss = huber_value_loss(values, batch.old_values, batch.returns, batch.value_mask, agg=agg, denom=denom,
                            delta=delta, clip_eps=clip_eps)
    with torch.no_grad():
        m = batch.value_mask
        metrics = {"value/loss": loss.item(), "value/mean": float(ops.masked_mean(values, m)),
                   "value/explained_var": float(1 - ops.masked_var(batch.returns - values, m, False)
                                                / ops.masked_var(batch.returns, m, False).clamp(min=1e-8))}
    return coef * loss, metrics


def safe_value_head(hidden: int, *, alpha=0.3, **_) -> SoftMinValueHead:
    """The critic head the trainer builds for this value loss (from the recipe's value kwargs)."""
    return SoftMinValueHead(hidden, alpha)


safe_value.head = safe_value_head
