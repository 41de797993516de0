"""What every preference objective shares: the input checks and TRL-named metrics.

Signature of every registered preference objective (kind "preference"):

    fn(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, *, beta=..., **hp) -> (loss, metrics)

Inputs are per-sequence log-probs, SUMMED over response tokens, shape [B] (listwise methods: [B, K],
column 0 the best); extra per-pair inputs (lengths, labels, win rates, ...) are keyword arguments each
method documents. `loss` is a scalar (mean over pairs); `metrics` a dict of floats named as in TRL:
rewards/chosen, rewards/rejected, rewards/margins, rewards/accuracies, logps/chosen, logps/rejected.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def check_pairs(*tensors: torch.Tensor | None, names=("chosen_logp", "rejected_logp", "ref_chosen_logp",
                                                      "ref_rejected_logp")) -> None:
    """Same shape, finite, non-empty; a clear ValueError otherwise."""
    given = [(n, t) for n, t in zip(names, tensors) if t is not None]
    shape = given[0][1].shape
    for name, t in given:
        if t.shape != shape:
            raise ValueError(f"{name} has shape {tuple(t.shape)} but {given[0][0]} has {tuple(shape)}: "
                             "every preference input needs one entry per pair")
        if t.numel() == 0:
            raise ValueError(f"{name} is empty: no preference pairs")
        if not bool(torch.isfinite(t).all()):
            bad = torch.nonzero(~torch.isfinite(t.reshape(t.shape[0], -1)).all(-1)).flatten().tolist()[:10]
            raise ValueError(f"{name} has NaN/inf log-probs in rows {bad} (empty or broken responses?)")


def implicit_rewards(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, beta: float):
    """beta * (log pi - log ref) for chosen and rejected (DPO's implicit reward), detached."""
    with torch.no_grad():
        return beta * (chosen_logp - ref_chosen_logp), beta * (rejected_logp - ref_rejected_logp)


# What `preference_metrics` logs (TRL's names); every loss that logs them declares them from here.
TRL_LOGS = {
    "rewards/chosen": ("Mean implicit reward beta * (log pi - log ref) of the chosen responses (TRL name; SimPO: beta "
                       "* per-token mean log pi; P3O, REFUEL, BRAIn: beta = 1).",
                       "0 at step 0 (policy = reference; SimPO's starts elsewhere). May drift below 0 while the "
                       "margin grows; a steep fall means the preferred answers are being unlearned too."),
    "rewards/rejected": ("Mean implicit reward of the rejected responses; it often falls, and so can chosen's.",
                         "0 at step 0, then falling, faster than rewards/chosen. Rising along with chosen: the "
                         "update lifts both answers, and only the margin is trained."),
    "rewards/margins": ("Mean chosen - rejected implicit reward: grows as the policy separates the pair.",
                        "0 at step 0, then growing steadily. Flat or negative: the pairs are not learned. SPPO drops "
                        "back to 0 at each iteration (its reference moves); APO below 0 (its reference is "
                        "extrapolated)."),
    "rewards/accuracies": ("Share of pairs whose chosen implicit reward exceeds the rejected one.",
                           "0 at step 0 (every implicit reward ties at 0 and the test is strict), well above 0.5 "
                           "within a few steps, then towards 1. Stuck near 0.5: the pairs are not separated."),
    "logps/chosen": ("Mean summed log-prob of the chosen responses under the policy.",
                     "Roughly flat, or rising. Falling steadily (with rewards/chosen below 0): the preferred answers "
                     "lose likelihood too, DPO's known displacement; compare with logps/rejected."),
    "logps/rejected": ("Mean summed log-prob of the rejected responses under the policy.",
                       "Falling, faster than logps/chosen: probability moves away from the rejected answers. Flat: "
                       "nothing is learned; rising: check that the pairs are not flipped."),
}


def preference_metrics(chosen_reward, rejected_reward, chosen_logp, rejected_logp) -> dict[str, float]:
    """TRL's DPO metrics from per-pair implicit rewards and policy log-probs ([B] each)."""
    with torch.no_grad():
        margins = chosen_reward - rejected_reward
        return {
            "rewards/chosen": float(chosen_reward.mean()),
            "rewards/rejected": float(rejected_reward.mean()),
            "rewards/margins": float(margins.mean()),
            "rewards/accuracies": float((chosen_reward > rejected_reward).float().mean()),
            "logps/chosen": float(chosen_logp.detach().mean()),
            "logps/rejected": float(rejected_logp.detach().mean()),
        }


def dpo_metrics(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, beta: float) -> dict[str, float]:
    """TRL's metrics with the implicit reward beta * (log pi - log ref) of chosen and rejected."""
    rc, rr = implicit_rewards(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, beta)
    return preference_metrics(rc, rr, chosen_logp, rejected_logp)


def check_beta(beta: float, name: str = "beta") -> None:
    if not (isinstance(beta, (int, float)) and math.isfinite(beta) and beta > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {beta!r}")


def smoothed_logistic(z: torch.Tensor, label_smoothing=0.0) -> torch.Tensor:
    """-(1 - eps) log sigma(z) - eps log sigma(-z) per pair: DPO's loss with cDPO label smoothing eps."""
    return -(1 - label_smoothing) * F.logsigmoid(z) - label_smoothing * F.logsigmoid(-z)
