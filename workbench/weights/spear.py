"""SPEAR's replay loss as a per-row weight: the rows `transform:spear` replayed train with the same PPO loss as the
step's own, times the self-imitation coefficient c_SIL(t) (`schedule:spear`).

    L = sum over fresh rows of l_i  +  c_SIL(t) * sum over replayed rows of l_i      (the recipe's aggregation)
    w_{i,t} = c_SIL(t) if row i is replayed (offpolicy_mask > 0), else 1

The reference (TencentYoutuResearch/SPEAR @ 7e8431513165640b4b1f78d09ebaae8807ee4f85,
`verl/verl/workers/actor/dp_actor.py` L505-598) takes the replay loss in a separate pass over the replay batch after
the fresh minibatches, aggregated over the replay batch alone, and scales it by c_SIL (L583-591). Decision: here the
replayed rows join the step's batch, so they share its minibatches, its optimizer steps and its denominators (token
counts; or the constant C of seq-mean-token-sum-norm, which makes the weighted loss exactly fresh + c_SIL x replay
with the same C: tests/weights/test_spear.py). `coef` is the weight itself: `schedule:spear` drives it
(`into="loss_weight:spear.coef"`); a constant coef is the reference's replay_loss_coef after T.
"""
from __future__ import annotations

import math

import torch

from workbench import registry
from workbench.batch import RolloutBatch, on_policy_rows
from workbench.rewards.tools import SPEAR_TITLE

SPEAR_WEIGHT_LOGS = {
    "spear/sil_coef": ("SPEAR: this step's self-imitation coefficient c_SIL(t) on the replayed rows' loss.",
                       "0 at step 0, a half cosine up to replay_loss_coef (1) at T, flat after."),
    "spear/replayed_share": ("SPEAR: share of the minibatch's rows that were replayed from the buffer, averaged over "
                             "minibatches.",
                             "0 on most steps, a spike on the steps that replay; always 0: the buffer never fills."),
}


def check_spear_weight(*, coef=1.0, **_) -> None:
    if isinstance(coef, bool) or not isinstance(coef, (int, float)) or not math.isfinite(coef) or coef < 0:
        raise ValueError(f"coef={coef!r} weighs the replayed rows' loss: give a finite number >= 0 (drive it with "
                         "schedule:spear)")


@registry.loss_weight(
    "spear", title=SPEAR_TITLE,
    summary="SPEAR's replay loss: rows replayed from the self-imitation buffer (offpolicy_mask > 0) weigh coef = "
            "c_SIL(t) in the policy loss, the step's own rows 1.",
    equation=r"w_{i,t} = \begin{cases} c_{SIL}(t) & i \text{ replayed}\\ 1 & \text{otherwise}\end{cases}",
    reads=("offpolicy_mask",), logs=SPEAR_WEIGHT_LOGS, check=check_spear_weight)
def spear_weight(batch: RolloutBatch, *, coef=1.0):
    """(w [B, T], metrics): coef on the replayed rows (`offpolicy_mask`), 1 elsewhere. Logs spear/sil_coef and
    spear/replayed_share."""
    check_spear_weight(coef=coef)
    replayed = ~on_policy_rows(batch)
    w = torch.where(replayed, torch.tensor(float(coef), dtype=batch.mask.dtype), torch.ones((), dtype=batch.mask.dtype))
    return w[:, None].expand_as(batch.mask).clone(), {"spear/sil_coef": float(coef),
                                                      "spear/replayed_share": float(replayed.double().mean())}
