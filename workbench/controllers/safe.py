"""SAFE's trust-region controller: short/long KL EMAs, a PID on the reward velocity and a training-phase detector
set the KL threshold theta of the penalty `safe-kl-control` / `safe`.

    kl_s <- 0.9 kl_s + 0.1 KL,   kl_l <- 0.99 kl_l + 0.01 KL
    v_t = EMA_0.95(reward)_t - EMA_0.95(reward)_{t-1};  e = v - 0.001
    PID = 0.3 e + 0.01 clip(sum e, -1, 1) + 0.05 (e - e_prev)          (0 on the first reward: the EMA starts there)
    phase from 50-step reward windows: WARMUP (< 50 rewards) 1.5, CLIMBING 1.2, PLATEAU 0.8, CONVERGED 1.0
    theta = clip((0.3 + PID) phase_mult, 0.1, 0.6)

Reference: ryyzn9/SAFE `safe/controllers/pid.py` (`PIDController`, `PhaseDetector`),
`safe/controllers/entropy_aware.py` (`EntropyAwarePredictiveController.compute_penalty`), commit 183daf7a.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from workbench import registry
from workbench.regularizers.safe import SAFE_TITLE

PHASE_MULT = {"WARMUP": 1.5, "CLIMBING": 1.2, "PLATEAU": 0.8, "CONVERGED": 1.0}
WINDOW = 50  # rewards per phase window


@dataclass
class SafeControl:
    """Everything `compute_penalty` keeps between calls (plus the hyper-parameters it was built with)."""

    base_threshold: float = 0.3
    kp: float = 0.3
    ki: float = 0.01
    kd: float = 0.05
    kl_short_decay: float = 0.9
    kl_short: float = 0.0
    kl_long: float = 0.0
    integral: float = 0.0
    prev_error: float = 0.0
    reward_ema: float | None = None
    rewards: list = field(default_factory=list)  # the last 2 WINDOW rewards (all the phase detector reads)
    n_rewards: int = 0
    phase: str = "WARMUP"
    pid: float = 0.0
    threshold: float = 0.45


def pid_update(state: SafeControl, reward: float) -> float:
    """`PIDController.update`: the PID output on the reward velocity error (anti-windup integral in [-1, 1])."""
    if state.reward_ema is None:
        state.reward_ema = reward
        return 0.0
    old = state.reward_ema
    state.reward_ema = 0.95 * state.reward_ema + 0.05 * reward
    error = (state.reward_ema - old) - 0.001  # actual velocity - target velocity
    state.integral = max(-1.0, min(1.0, state.integral + error))
    out = state.kp * error + state.ki * state.integral + state.kd * (error - state.prev_error)
    state.prev_error = error
    return out


def detect_phase(rewards: list, n_rewards: int) -> str:
    """`PhaseDetector.update`: compare the last 50 rewards with the 50 before (or with themselves before 100)."""
    if n_rewards < WINDOW:
        return "WARMUP"
    recent = rewards[-WINDOW:]
    old = rewards[-2 * WINDOW:-WINDOW] if n_rewards >= 2 * WINDOW else recent
    recent_mean, old_mean = sum(recent) / len(recent), sum(old) / len(old)
    if recent_mean > old_mean + 0.01:
        return "CLIMBING"
    if np.std(recent) < 0.02 and recent_mean > 0.7:
        return "CONVERGED"
    return "PLATEAU"


def control_step(state: SafeControl, kl: float | None, reward: float) -> SafeControl:
    """One `compute_penalty` call's state update, in its order: KL EMAs, phase, PID, threshold."""
    if kl is not None:
        state.kl_short = state.kl_short_decay * state.kl_short + (1 - state.kl_short_decay) * kl
        state.kl_long = 0.99 * state.kl_long + 0.01 * kl
    state.rewards = (state.rewards + [reward])[-2 * WINDOW:]
    state.n_rewards += 1
    state.phase = detect_phase(state.rewards, state.n_rewards)
    state.pid = pid_update(state, reward)
    state.threshold = max(0.1, min(0.6, (state.base_threshold + state.pid) * PHASE_MULT[state.phase]))
    return state


# What the pipeline logs of the parameters it drives (`Pipeline.driven_metrics`), for either regularizer.
SAFE_DRIVEN_LOGS = {
    "regularizer:safe-kl-control.threshold": ("SAFE KL control: threshold theta set by the controller (0.3 + PID of "
                                              "the reward velocity, times the phase multiplier, clipped to [0.1, "
                                              "0.6]).",
                                              "0.45 for the first 50 steps (warm-up x 1.5, PID near 0), then 0.36 "
                                              "while the reward climbs, 0.24 on a plateau, 0.3 once converged."),
    "regularizer:safe-kl-control.kl_short_prev": ("SAFE KL control: short KL EMA kl_s' after the previous step.",
                                                  "Follows safe/kl_short of the previous step; see there."),
    "regularizer:safe.threshold": ("SAFE: threshold theta set by the safe-kl-control controller (as above).",
                                   "As regularizer:safe-kl-control.threshold."),
    "regularizer:safe.kl_short_prev": ("SAFE: short KL EMA kl_s' after the previous step.",
                                       "As regularizer:safe-kl-control.kl_short_prev."),
}


@registry.controller(
    "safe-kl-control", title=SAFE_TITLE,
    summary="SAFE's threshold controller: KL EMAs, a PID on the reward velocity and a 4-phase detector set the "
            "KL threshold theta; drives the penalty's threshold and short EMA (into='regularizer:safe-kl-control' "
            "or 'regularizer:safe').",
    equation=r"\theta = \mathrm{clip}\big((0.3 + K_p e + K_i\,\mathrm{clip}(\textstyle\sum e, \pm 1) + K_d\,\Delta e)"
             r"\,m_{\mathrm{phase}},\ 0.1,\ 0.6\big),\ e = \Delta\mathrm{EMA}_{0.95}(R) - 0.001", logs=SAFE_DRIVEN_LOGS)
class SafeKLControl:
    """State: a `SafeControl`, updated after each step from its logged `safe/kl` (the live token-mean KL to the
    reference, averaged over the step's minibatches) and `reward/mean`.

    Defaults from `safe/config.py` (`SAFEConfig`) and `configs/base.yaml`: base threshold 0.3, K_p 0.3, K_i 0.01,
    K_d 0.05; the EMA decay 0.9 is read from the driven penalty's `kl_short_decay` (`initial`), so the two agree.
    Our reading: the reference calls `compute_penalty` once per optimizer epoch (2 per batch, with the same reward);
    here the controller advances once per training step, so theta at step t uses the rewards up to t - 1. The long
    EMA kl_l is kept (the reference only logs it). A step that trained nothing (no `safe/kl`) leaves the KL EMAs.
    """

    @staticmethod
    def init(*, initial, base_threshold=0.3, kp=0.3, ki=0.01, kd=0.05):
        if not base_threshold > 0:
            raise ValueError(f"base_threshold must be > 0, got {base_threshold}")
        if min(kp, ki, kd) < 0:
            raise ValueError(f"PID gains must be >= 0, got kp={kp}, ki={ki}, kd={kd}")
        decay = float((initial or {}).get("kl_short_decay", 0.9))
        state = SafeControl(base_threshold=base_threshold, kp=kp, ki=ki, kd=kd, kl_short_decay=decay)
        state.threshold = max(0.1, min(0.6, base_threshold * PHASE_MULT["WARMUP"]))
        return state

    @staticmethod
    def update(state, batch, metrics):
        kl = metrics.get("safe/kl")
        return control_step(state, None if kl is None else float(kl), float(metrics["reward/mean"]))

    @staticmethod
    def value(state):
        return {"threshold": state.threshold, "kl_short_prev": state.kl_short}
