"""SAC's automatic temperature: log alpha descends J(alpha) = alpha agg(H_t - Hbar) after each step.

    g = dJ/dlog(alpha) = alpha agg(H_t - Hbar)          (autograd on `temperature_loss`)
    adam: log alpha <- log alpha - lr m_hat / (sqrt(v_hat) + eps)      (torch.optim.Adam, as cleanrl's a_optimizer)
    sgd:  log alpha <- log alpha - lr g

It drives the `alpha` of the regularizer `sac-temperature` (into="regularizer:sac-temperature.alpha").
Reference: vwxyzjn/cleanrl `cleanrl/sac_atari.py` (`autotune`: `log_alpha`, `a_optimizer = Adam(lr=q_lr, eps=1e-4)`,
`alpha_loss`), commit fe8d8a03.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from workbench import registry
from workbench.regularizers.sac_temperature import SAC_TITLE, temperature_loss

OPTIMIZERS = ("adam", "sgd")


@dataclass
class Temperature:
    """log alpha and the optimizer's moments (Adam: first / second moment and step count)."""

    log_alpha: float
    target_entropy: float
    lr: float
    optimizer: str = "adam"
    betas: tuple = (0.9, 0.999)
    eps: float = 1e-4
    agg: str = "token-mean"
    m: float = 0.0
    v: float = 0.0
    t: int = 0

    @property
    def alpha(self) -> float:
        return math.exp(self.log_alpha)


def log_alpha_grad(state: Temperature, entropy: torch.Tensor, mask: torch.Tensor) -> float:
    log_alpha = torch.tensor(state.log_alpha, dtype=torch.float64, requires_grad=True)
    J = temperature_loss(log_alpha, entropy.double(), mask.double(), target_entropy=state.target_entropy,
                         agg=state.agg)
    (g,) = torch.autograd.grad(J, log_alpha)
    return float(g)


def descend(state: Temperature, g: float) -> Temperature:
    """One optimizer step on log alpha with gradient g (Adam exactly as `torch.optim.Adam`, no weight decay)."""
    if state.optimizer == "sgd":
        state.log_alpha -= state.lr * g
        return state
    b1, b2 = state.betas
    state.t += 1
    state.m = b1 * state.m + (1 - b1) * g
    state.v = b2 * state.v + (1 - b2) * g * g
    m_hat, v_hat = state.m / (1 - b1 ** state.t), state.v / (1 - b2 ** state.t)
    state.log_alpha -= state.lr * m_hat / (math.sqrt(v_hat) + state.eps)
    return state


# What the pipeline logs of the parameter it drives (`Pipeline.driven_metrics`).
SAC_DRIVEN_LOGS = {
    "regularizer:sac-temperature.alpha": ("SAC temperature: entropy-bonus coefficient alpha = exp(log alpha) set by "
                                          "the controller this step.",
                                          "Moves by about lr in log space per step: falls while entropy is above the "
                                          "target (0.5 nats), rises below it. Pinned at a bound or oscillating "
                                          "widely: lr too high."),
}


@registry.controller(
    "sac-temperature", title=SAC_TITLE,
    summary="Learns log alpha by descending J(alpha) = alpha agg(H_t - Hbar) after every step (Adam, as cleanrl); "
            "drives the entropy bonus regularizer:sac-temperature.alpha.",
    equation=r"\log\alpha \leftarrow \log\alpha - \eta\,\widehat{\nabla}_{\log\alpha}"
             r"\,\alpha\,\mathrm{agg}(H_t - \bar H)",
    reads=("entropy",), logs=SAC_DRIVEN_LOGS, choices={"optimizer": OPTIMIZERS})
class SACTemperature:
    """State: a `Temperature`, starting at log(initial) (the regularizer's recipe alpha, > 0), updated after each step
    from the batch's sampling-policy entropy [B, T] (`batch.entropy`) on `batch.mask`.

    Defaults from cleanrl `sac_atari.py`: Adam with lr = q_lr = 3e-4, eps 1e-4, betas (0.9, 0.999);
    `optimizer="sgd"` is the catalog's plain SGD. Our reading (`unverified`): the target entropy is an absolute
    number of nats, 0.5 by default (the LLM-scale entropy target AEPO/DCPO use as `entropy_base`), because
    cleanrl's discrete target 0.89 log|A| would be about 10 nats for an LLM vocabulary. cleanrl's `alpha_loss` is a
    `.mean()` over the actions too, i.e. J / |A|; Adam makes that scale almost irrelevant, and J here is the exact
    expectation. `agg` is how the batch's entropies are aggregated in J (token-mean: the logged `entropy`).
    """

    @staticmethod
    def init(*, initial, target_entropy=0.5, lr=3e-4, optimizer="adam", betas=(0.9, 0.999), eps=1e-4,
             agg="token-mean"):
        if initial is None or not initial > 0:
            raise ValueError(f"the driven alpha must start > 0 (log alpha is learned), got {initial}")
        if optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}")
        if not lr > 0 or not eps > 0 or not all(0 <= b < 1 for b in betas):
            raise ValueError(f"need lr > 0, eps > 0 and betas in [0, 1), got lr={lr}, eps={eps}, betas={betas}")
        if target_entropy < 0:
            raise ValueError(f"target_entropy must be >= 0 nats, got {target_entropy}")
        return Temperature(math.log(initial), float(target_entropy), float(lr), optimizer, tuple(betas), float(eps),
                           agg)

    @staticmethod
    def update(state, batch, metrics):
        batch.require("entropy")
        if batch.mask.sum() == 0:
            return state
        return descend(state, log_alpha_grad(state, batch.entropy, batch.mask))

    @staticmethod
    def value(state):
        return state.alpha
