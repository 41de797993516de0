"""SAC's automatic entropy temperature, ported to token policies: an entropy bonus whose coefficient alpha is learned.

    policy term        L += -alpha agg(H_t)                         (`entropy_bonus` with coef = alpha)
    temperature loss   J(alpha) = E_{a~pi}[-alpha (log pi(a|s) + Hbar)] = alpha agg(H_t - Hbar)
                       (the exact vocabulary expectation: E_a[log pi(a|s)] = -H_t)

The controller `sac-temperature` (workbench/controllers/sac_temperature.py) descends J in log alpha and drives
`alpha`. Reference: vwxyzjn/cleanrl `cleanrl/sac_atari.py` (discrete SAC, exact expectation over actions) and
`cleanrl/sac_continuous_action.py` (`autotune`), commit fe8d8a03.
"""
from __future__ import annotations

import torch

from workbench import ops, registry
from workbench.regularizers.entropy import entropy_bonus

SAC_TITLE = "Soft Actor-Critic Algorithms and Applications"


def temperature_loss(log_alpha: torch.Tensor, entropy: torch.Tensor, mask: torch.Tensor, *, target_entropy: float,
                     agg="token-mean", denom=None) -> torch.Tensor:
    """J(alpha) = alpha agg(H_t - Hbar), alpha = exp(log_alpha), entropy [B, T] detached: dJ/dalpha > 0 when the
    policy is more random than the target (alpha falls), < 0 when less (alpha rises), 0 at H = Hbar."""
    return log_alpha.exp() * ops.aggregate(entropy.detach() - target_entropy, mask, agg, denom)


@registry.regularizer(
    "sac-temperature", title=SAC_TITLE,
    summary="Entropy bonus -alpha agg(H) whose alpha is learned by the controller sac-temperature (SAC's "
            "automatic temperature: alpha falls above the target entropy, rises below it).",
    equation=r"L \mathrel{-}= \alpha\,\mathrm{agg}(H_t),\quad J(\alpha) = \alpha\,\mathrm{agg}(H_t - \bar H)",
    reads=("entropy",))
def sac_temperature(forward, batch, *, agg="token-mean", denom=None, alpha=0.2):
    """`entropy_bonus` with coef = alpha on the training forward's entropy [B, T]. Default alpha 0.2 is cleanrl's
    fixed `alpha` (without autotune); the controller starts from the recipe's value and drives it."""
    if not alpha >= 0:
        raise ValueError(f"alpha must be >= 0, got {alpha}")
    return entropy_bonus(forward.entropy, batch.mask, coef=alpha, agg=agg, denom=denom), {}
