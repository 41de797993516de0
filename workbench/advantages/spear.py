"""SPEAR's advantages: GRPO's on the step's own rows, the recalibrated one on the rows replayed from its buffer.

    fresh row i (offpolicy_mask = 0):     A_i = R_i - mean_g R  (/ (std_g R + 1e-6) when norm_by_std)   over its group
    replayed row i (offpolicy_mask > 0):  A_i = R_i - baseline_rewards_i

`transform:spear` appends the replayed rows with baseline_rewards = R - A^SIL, A^SIL = R - p50(recent group means)
(/ (p50(recent group stds) + 1e-6) with norm_by_std) > 0, so a replayed row's advantage is the recalibrated one and
always > 0 (the card's test). The fresh rows' group statistics are taken over the fresh rows alone (the replayed rows
form their own group, which GRPO would normalise among themselves): verl's `compute_grpo_outcome_advantage` on the
step's batch (Bessel std, eps 1e-6), SPEAR's Dr.BoT setting norm_by_std=False (`norm_adv_by_std_in_grpo`).

Reference: TencentYoutuResearch/SPEAR @ 7e8431513165640b4b1f78d09ebaae8807ee4f85,
`verl/verl/trainer/ppo/core_algos.py::compute_grpo_outcome_advantage` (the custom_reward_mean_std branch for the
replayed rows, the group branch for the fresh ones).
"""
from __future__ import annotations

import torch

from workbench import registry
from workbench.advantages.base import broadcast
from workbench.advantages.group import grpo
from workbench.batch import RolloutBatch, on_policy_rows
from workbench.rewards.tools import SPEAR_TITLE



def check_spear_advantage(*, norm_by_std=False, allow_singletons=False, **_) -> None:
    if not isinstance(norm_by_std, bool):
        raise ValueError(f"norm_by_std must be True or False (verl's norm_adv_by_std_in_grpo; SPEAR's Dr.BoT: False), "
                         f"got {norm_by_std!r}")


@registry.advantage(
    "spear", title=SPEAR_TITLE,
    summary="GRPO's group advantage on the step's own rows (no std scaling by default, Dr.BoT) and, on the rows "
            "transform:spear replayed from its buffer, the recalibrated R - b (b the median of recent group mean "
            "rewards), always positive.",
    equation=r"A_i = \begin{cases} R_i - \mathrm{mean}_g R & i \text{ fresh}\\ R_i - b & i \text{ replayed},\ "
             r"b = \mathrm{p50}\{\bar r_g\}_{g \in H}\end{cases}",
    reads=("rewards", "group", "offpolicy_mask", "baseline_rewards"), check=check_spear_advantage)
def spear_advantage(batch: RolloutBatch, *, norm_by_std=False, allow_singletons=False):
    """A [B, T]. Reads `rewards`, `group`, `mask`, `offpolicy_mask` (which rows were replayed) and `baseline_rewards`
    (their effective baseline, from transform:spear). allow_singletons: GRPO's (a fresh row alone in its group gets
    A = 0 instead of an error)."""
    check_spear_advantage(norm_by_std=norm_by_std)
    batch.require("rewards", "baseline_rewards")
    fresh = on_policy_rows(batch)
    index = torch.nonzero(fresh).flatten()
    out = torch.zeros(batch.mask.shape, dtype=torch.float64)
    out[index] = grpo(batch.select(index), scale="group" if norm_by_std else "none",
                      allow_singletons=allow_singletons).double()
    replayed = torch.nonzero(~fresh).flatten()
    sil = batch.rewards.double() - batch.baseline_rewards.double()
    out[replayed] = broadcast(sil, batch.mask.double())[replayed]
    return out
