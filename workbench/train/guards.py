"""What stops a run that would otherwise train on nothing or on garbage, with a message that names the cause."""
from __future__ import annotations

import math

DEAD_STEPS = 3  # consecutive steps with advantages but no gradient anywhere before the run stops


class NoGradientError(RuntimeError):
    """Training steps with non-zero advantages moved no trainable parameter."""


class NonFiniteError(RuntimeError):
    """A loss or gradient norm was NaN or infinite."""


class DeadGradientGuard:
    """Stop a run that trains on nothing: DEAD_STEPS steps in a row with non-zero advantages and no gradient."""

    def __init__(self):
        self.dead_steps = 0

    def check(self, signal: bool, moved: bool) -> None:
        self.dead_steps = self.dead_steps + 1 if signal and not moved else 0
        if self.dead_steps >= DEAD_STEPS:
            raise NoGradientError(
                f"{self.dead_steps} consecutive steps had non-zero advantages but no gradient reached any trainable "
                f"parameter (grad_norm = 0): the loss is not connected to the parameters being trained. Likely causes: "
                f"a quantized (4-bit) base whose inference kernels dropped the autograd graph (load it with "
                f"workbench.models.load_model(..., load_in_4bit=True), which keeps it trainable), a LoRA adapter that "
                f"is not attached, parameters frozen with requires_grad=False, or an objective that masked every "
                f"token (e.g. capo with thresholds too tight for the learning rate: see capo/masked_frac).")


# What the guards log (`NonFiniteGuard.metrics`).
GUARD_METRICS = {
    "nonfinite/skipped": ("Updates dropped this step for a NaN/inf loss or gradient norm (only with nonfinite=skip); "
                          "healthy runs stay at 0.",
                          "0 on every step. Anything else: a NaN/inf loss or gradient norm was dropped; several in a "
                          "row mean the run diverged (lower lr, clamp log-ratios, train in float32)."),
}


class NonFiniteGuard:
    """Checks every update before the optimizer takes it. mode "stop": a NaN/inf loss or gradient norm ends the
    run with NonFiniteError (the weights and the last checkpoint are untouched); "skip": the update is dropped
    and counted (`skipped`, logged per step as nonfinite/skipped)."""

    def __init__(self, mode: str = "stop"):
        self.mode, self.skipped = mode, 0

    def allows(self, step: int, loss: float, grad_norm: float) -> bool:
        """True when the update may be applied; False (skip mode) when it must be dropped."""
        if math.isfinite(loss) and math.isfinite(grad_norm):
            return True
        if self.mode == "skip":
            self.skipped += 1
            return False
        raise NonFiniteError(
            f"step {step}: the loss is {loss} and the gradient norm {grad_norm}; the update was not applied. Likely "
            f"causes: a learning rate so high the weights overflowed (lower lr), a reward or objective producing "
            f"inf/NaN (a log of 0, an unbounded importance ratio), or bf16 overflow (dtype=float32). To drop such "
            f"updates and go on instead, set nonfinite=skip (a new config: use another --out).")

    def take(self) -> int:
        """Updates skipped since the last call (this step's count)."""
        skipped, self.skipped = self.skipped, 0
        return skipped

    def metrics(self) -> dict:
        """This step's row entry: nonfinite/skipped in skip mode (then always logged), nothing in stop mode."""
        return {"nonfinite/skipped": self.take()} if self.mode == "skip" else {}
