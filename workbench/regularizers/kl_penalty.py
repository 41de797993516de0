"""KL to a frozen reference, in the loss (GRPO family) or in the reward (PPO/RLOO), and its controllers."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from workbench import kl, ops, registry


@registry.regularizer(
    "kl-penalty", title="Fine-Tuning Language Models from Human Preferences",
    summary="beta * KL(pi || ref) either added to the loss or subtracted from per-token rewards.",
    equation=r"\text{loss: } L \mathrel{+}= \beta\,\mathrm{agg}(k_t);\quad \text{reward: } r_t \leftarrow r_t - \beta k_t")
def kl_in_loss(logp, ref_logp, mask, *, beta=0.0, estimator="k3", agg="token-mean", denom=None, value_clamp=None):
    """Loss term beta * agg(k_t) and the mean per-token estimate (for logging).

    value_clamp bounds each k_t (OpenRLHF: 10; verl `low_var_kl`: 10 for k3; TRL: none).
    """
    per_token = kl.estimate(logp, ref_logp, estimator, value_clamp=value_clamp)
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


@dataclass
class AdaptiveKLController:
    """Ziegler et al.: e = clip(KL/target - 1, -0.2, 0.2); beta <- beta * (1 + e * n_steps / horizon)."""

    beta: float
    target: float = 6.0
    horizon: int = 10000

    def update(self, current_kl: float, n_steps: int) -> float:
        error = min(max(current_kl / self.target - 1, -0.2), 0.2)
        self.beta *= 1 + error * n_steps / self.horizon
        return self.beta
