"""Ziegler et al.'s adaptive KL coefficient: beta follows the measured KL towards a target."""
from __future__ import annotations

from dataclasses import dataclass

from workbench import registry


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


# What the pipeline logs of the coefficient this controller drives (`Pipeline.driven_metrics`).
ADAPTIVE_KL_LOGS = {
    "kl_coef": ("KL coefficient used this step when a controller drives it (adaptive-kl).",
                "Drifts slowly (at most 0.2 B/horizon relative change per step): up while kl is above the target, "
                "down while below. kl is per token here, so the default target 6 (per sequence) only lowers beta."),
}


@registry.controller(
    "adaptive-kl", title="Fine-Tuning Language Models from Human Preferences", family="canonical",
    summary="Drive a KL coefficient (into=...beta) towards the KL target: beta grows while KL is above it.",
    equation=r"\beta \leftarrow \beta\,\big(1 + \mathrm{clip}(\mathrm{KL}/\mathrm{KL}_{target} - 1, \pm 0.2)\,n/H\big)",
    reads=("kl",), logs=ADAPTIVE_KL_LOGS)
class AdaptiveKL:
    """State: an `AdaptiveKLController` starting at the driven parameter's recipe value (`initial`); updated
    after each step from that step's logged `kl` and its number of samples."""

    @staticmethod
    def init(*, initial, target=6.0, horizon=10000):
        return AdaptiveKLController(float(initial), target, horizon)

    @staticmethod
    def update(state, batch, metrics):
        if metrics.get("kl") is None:
            raise ValueError("adaptive-kl needs the KL to the reference each step: keep track_kl=true")
        state.update(metrics["kl"], n_steps=batch.size)
        return state

    @staticmethod
    def value(state):
        return state.beta
