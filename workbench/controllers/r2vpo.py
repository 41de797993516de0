"""R²VPO's dual variable: projected dual ascent on lam from the measured ratio variance.

    lam <- max(0, lam + lr (Var_hat(r) - delta))

Var_hat(r) is the objective `r2vpo`'s logged `r2vpo/ratio_var` for the step (the mean over its optimizer steps),
so lam grows while the policy moves further from pi_old than the budget delta allows and decays to 0 when it
stays inside.
"""
from __future__ import annotations

from workbench import registry
from workbench.objectives.r2vpo import R2VPO_TITLE

MEASURED = "r2vpo/ratio_var"


def dual_step(lam: float, measured: float, *, delta: float, lr: float) -> float:
    """One projected dual-ascent step on the constraint Var(r) <= delta."""
    return max(0.0, lam + lr * (measured - delta))


# What the pipeline logs of the parameter it drives (`Pipeline.driven_metrics`).
R2VPO_DRIVEN_LOGS = {
    "objective:r2vpo.lam": ("R²VPO: the penalty weight lam the dual-ascent controller set for this step.",
                            "Starts at 1; up while r2vpo/ratio_var > delta, down while below (to 0 within about 6 "
                            "steps at delta 0.02 on notebook 10's run; near 1 at delta 0.002). Climbing without "
                            "bound: the variance budget is never met."),
}


@registry.controller(
    "r2vpo", title=R2VPO_TITLE,
    summary="Dual ascent on R²VPO's penalty weight (into='objective:r2vpo.lam'): lam grows while the measured "
            "ratio variance exceeds delta and decays to 0 otherwise.",
    equation=r"\lambda \leftarrow \max\big(0, \lambda + \alpha_\lambda(\widehat{\mathrm{Var}}(r) - \delta)\big)",
    logs=R2VPO_DRIVEN_LOGS)
class R2VPODual:
    """State {"lam": float}, starting at the objective's `lam` (`initial`); updated after each step.

    Our reading (abstract-only), the catalog's "decide":
    - delta = 0.02: for nearby policies E[(r - 1)^2] = chi^2(pi || pi_old) ~ 2 KL(pi_old || pi), so delta = 0.02 is
      TRPO's KL budget 0.01 (ratio std ~0.14, inside PPO's 0.2 band).
    - lr = 10: a measured variance of 2 delta raises lam by 0.2 per step; an on-policy step (variance 0) lowers it
      by 0.2, so lam = 1 decays to 0 in 5 steps when the constraint never binds.
    - one dual step per training step (the catalog: per optimizer step) on the step's mean measured variance.
    """

    @staticmethod
    def init(*, initial, delta=0.02, lr=10.0):
        if initial is None or not float(initial) >= 0:
            raise ValueError(f"the initial lam must be >= 0, got {initial}")
        if not delta > 0:
            raise ValueError(f"delta (ratio-variance budget) must be > 0, got {delta}")
        if not lr > 0:
            raise ValueError(f"lr (dual step size) must be > 0, got {lr}")
        return {"lam": float(initial), "delta": float(delta), "lr": float(lr)}

    @staticmethod
    def update(state, batch, metrics):
        measured = metrics.get(MEASURED)
        if measured is None:
            if metrics.get("loss/policy") is None:
                return state  # nothing was trained this step (every token masked): no measurement, no dual step
            raise ValueError(f"controller r2vpo needs the objective 'r2vpo' (it reads the logged {MEASURED!r})")
        return {**state, "lam": dual_step(state["lam"], float(measured), delta=state["delta"], lr=state["lr"])}

    @staticmethod
    def value(state):
        return state["lam"]
