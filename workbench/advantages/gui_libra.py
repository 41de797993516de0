"""GUI-Libra's success-adaptive scaling of negative advantages (an advantage-chain entry after `grpo`).

    p_g = mean_g R                                     the group's success rate (mean reward)
    s_g = clip(base + coef p_g, 0, 1)
    A_i <- s_g A_i  if A_i < 0,   A_i  otherwise

Under partial verifiability (several actions are right, only the demonstrated one is rewarded) a "wrong" sample
of a hard group is often an unrewarded right action: its negative gradient is unreliable, so it is scaled down
the more, the lower the group's success rate. The KL trust region is the recipe's `kl-penalty` regularizer.
"""
from __future__ import annotations

import torch

from workbench import registry
from workbench.advantages.base import sequence_rewards
from workbench.advantages.group import group_stats
from workbench.batch import RolloutBatch

GUI_LIBRA_TITLE = ("GUI-Libra: Training Native GUI Agents to Reason and Act with Action-aware Supervision and "
                   "Partially Verifiable RL")


def check_scale(*, base=0.5, coef=1.5) -> None:
    if not 0 <= base <= 1:
        raise ValueError(f"base must be in [0, 1] (the scale of a group with success rate 0), got {base}")
    if not coef >= 0:
        raise ValueError(f"coef must be >= 0 (the scale must not fall as the success rate rises), got {coef}")


def success_scale(rewards: torch.Tensor, group: torch.Tensor, *, base=0.5, coef=1.5) -> torch.Tensor:
    """s_g [B] = clip(base + coef mean_g R, 0, 1) for each row's group (GUI-Libra `id2mean`)."""
    check_scale(base=base, coef=coef)
    mean, _, _ = group_stats(rewards, group)
    return (base + coef * mean).clamp(0.0, 1.0)


@registry.advantage(
    "gui-libra", title=GUI_LIBRA_TITLE,
    summary="Success-adaptive scaling of negative advantages after grpo: A < 0 is multiplied by "
            "clip(base + coef mean_g R, 0, 1), so unreliable negatives of low-success groups weigh less. The "
            "action-aware SFT stage (weighted SFT) is outside RL training and not modelled here.",
    equation=r"A_i \leftarrow \begin{cases} \mathrm{clip}(b + c\,\bar R_g, 0, 1)\,A_i & A_i < 0 \\ A_i & "
             r"A_i \ge 0\end{cases}",
    reads=("advantages",), check=check_scale)
def gui_libra(batch: RolloutBatch, *, base=0.5, coef=1.5):
    r"""Rescales the chain's `advantages` [B, T]; reads `rewards` (+ `token_rewards`, as `grpo` does) and `group`.

    Source: GUI-Libra's RL code (EasyR1 fork), `verl/trainer/core_algos.py`, advantage estimator
    `grpo_weighted_positive_negative`: after the GRPO z-score, `if scores[i] < 0: scores[i] *=
    clamp(weighted_posneg_base + weighted_posneg_coef * id2mean[index[i]], 0, 1)`, with id2mean the group's mean
    score. Defaults base = 0.5, coef = 1.5 are `weighted_posneg_base` / `weighted_posneg_coef` of the released
    `examples/gui_grpo.sh` (read in the fork seooyxx/GUI-Libra at 14566cfa; the official repository's RL files are
    not in the index): s = 0.5 at success rate 0, 1 from success rate 1/3 on. (The catalog's hypothesis
    s = clip(p, 0.1, 1) is replaced by the code's form.)

    base = 1, coef = 0 give s = 1: plain GRPO advantages (KL-GRPO with the recipe's KL term). Positive and zero
    advantages are never changed. The action-aware SFT (ASFT) reweighting of action / grounding tokens is a
    supervised warm-start stage, outside RL training, and is not implemented.
    """
    batch.require("advantages", "rewards")
    scale = success_scale(sequence_rewards(batch), batch.group, base=base, coef=coef)  # [B]
    advantages = batch.advantages
    return torch.where(advantages < 0, advantages * scale[:, None].to(advantages.dtype), advantages)
