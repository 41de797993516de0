"""Duration-aware gradient weighting (RL for ML-engineering agents, arXiv 2509.01684): in asynchronous actor-learner
RL, an action that takes Delta t to execute returns at a rate proportional to 1 / Delta t, so fast actions dominate
the updates; weighting each sample's loss by its duration undoes that.

    w_i = Delta t_i / mean_j Delta t_j        over the minibatch's rows with a trained token (batch mean 1)
    l_{i,t} <- w_i l_{i,t}                    the objective's per-token loss: the sequence loss times w_i

Why it is unbiased: rows arrive with probability q_i proportional to 1 / Delta t_i, so
E_q[w g] = sum_i q_i Delta t_i g_i / sum_i q_i Delta t_i = (1/K) sum_i g_i, the synchronous (uniform) update
(tests/weights/test_rl4mle_duration.py simulates the queue).

Delta t, at our scale: a training signal must not depend on wall-clock time (a resumed run must replay the straight
one, and timings vary with the machine), so Delta t is a deterministic proxy the environment reports per step in the
row's `turn_info` (one dict per environment step):
    duration="steps"  one unit per environment step (a tool call, or the final answer): our calculator and search
                      tools take the same time per call, so an episode's execution time is its number of steps
    duration="info"   the sum of each step's info["duration"], for an environment that declares a per-action cost
                      (none of ours does yet: refused, naming the fix, when a step lacks it)
Every episode takes at least one step, so Delta t >= 1 with "steps".

Where the paper is silent (abstract only; the code, sherryy/rl4mle, is not available): the normalization w / mean
(the card's reading), the mean taken over the minibatch the weight is computed on (the loss weights' contract: one
optimizer step's rows; each rank's own rows under data parallelism), rows without a trained token left out of it.
"""
from __future__ import annotations

import math
from numbers import Real

import torch

from workbench import registry
from workbench.batch import RolloutBatch

RL4MLE_TITLE = "Reinforcement Learning for Machine Learning Engineering Agents"
DURATIONS = ("steps", "info")  # the proxy for an action's execution time: environment steps, or a declared cost

RL4MLE_LOGS = {
    "rl4mle/duration_mean": ("RL4MLE: mean duration proxy Delta t of the minibatch's trained rows (environment steps, "
                             "or the declared info['duration'] costs), averaged over minibatches.",
                             "Between 1 and max_turns with duration='steps'. Falling towards 1: the policy drifts to "
                             "fast (few-step) episodes; the weighting exists to stop that where they earn less."),
    "rl4mle/weight_max": ("RL4MLE: largest per-row weight Delta t_i / mean(Delta t) in the minibatch.",
                          "1 when every episode takes as long; about max_turns / mean steps at most. Very large: one "
                          "slow episode carries most of the minibatch's gradient."),
}


def episode_duration(info: list[dict], duration: str = "steps") -> float:
    """Delta t of one row from its per-step infos (`RolloutBatch.turn_info[i]`)."""
    if duration == "steps":
        return float(len(info))
    costs = [step.get("duration") for step in info]
    bad = [s for s, c in enumerate(costs) if isinstance(c, bool) or not isinstance(c, Real) or not math.isfinite(c)
           or c < 0]
    if bad:
        raise ValueError(f"rl4mle-duration: duration='info' reads each step's info['duration'] (a finite cost >= 0), "
                         f"but steps {bad[:10]} of an episode give {[costs[s] for s in bad[:3]]}; use duration="
                         "'steps' (one unit per environment step) or an environment whose step info declares it")
    return float(sum(costs))


def duration_weights(durations: torch.Tensor, trained: torch.Tensor) -> torch.Tensor:
    """[B] Delta t_i / mean(Delta t over the `trained` rows [B] bool); 1 everywhere when no row is trained or the mean
    is 0 (no duration to compare)."""
    if not bool(trained.any()):
        return torch.ones_like(durations)
    mean = durations[trained].mean()
    return durations / mean if float(mean) > 0 else torch.ones_like(durations)


@registry.loss_weight(
    "rl4mle-duration", title=RL4MLE_TITLE,
    summary="Each row's policy loss times Delta t_i / mean(Delta t) (minibatch mean 1), so fast actions that return "
            "more often do not dominate. At our scale: Delta t is the episode's number of environment steps (tool "
            "calls + answer; duration='steps'), or the sum of the costs its steps declare in info['duration'] "
            "('info'), never wall-clock time.",
    equation=r"l_{i,t} \leftarrow \frac{\Delta t_i}{\frac{1}{B}\sum_j \Delta t_j}\,l_{i,t},\quad "
             r"\Delta t_i = \#\text{steps of episode } i",
    reads=("turn_info",), needs=("multi_turn",), logs=RL4MLE_LOGS, choices={"duration": DURATIONS})
def rl4mle_duration(batch: RolloutBatch, *, duration="steps"):
    """(w [B, T], metrics) on a minibatch: w_i = Delta t_i / mean(Delta t) over the rows with a trained token,
    constant along each row (it multiplies the row's sequence loss). Reads `turn_info` (per row, per step: the
    environment's info) and `mask`. Logs rl4mle/duration_mean and rl4mle/weight_max."""
    if duration not in DURATIONS:
        raise ValueError(f"duration must be one of {DURATIONS}, got {duration!r}")
    if len(batch.turn_info) != batch.size:
        raise ValueError(f"rl4mle-duration reads each row's per-step infos (turn_info), but the batch holds "
                         f"{len(batch.turn_info)} for {batch.size} rows; use a rollout that plays the task's "
                         "environment (turns)")
    dt = torch.tensor([episode_duration(info, duration) for info in batch.turn_info], dtype=batch.mask.dtype)
    trained = batch.mask.sum(-1) > 0
    w = duration_weights(dt, trained)
    shown = dt[trained] if bool(trained.any()) else dt
    metrics = {"rl4mle/duration_mean": float(shown.mean()),
               "rl4mle/weight_max": float(w[trained].max()) if bool(trained.any()) else 1.0}
    return w[:, None].expand_as(batch.mask).clone(), metrics
