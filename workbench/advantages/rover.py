"""ROVER's alternative reward shaping (the authors' `adv_estimator=rover`): rarity-weighted success and failure.

For an outcome reward R_i, a response counts as correct when R_i > 0. With p the share of correct responses and
q = 1 - p the share of wrong ones among the responses it is compared with,

    r~_i = +c_+ (1 - p)   if R_i > 0        (a correct answer is worth more where correct answers are rare)
    r~_i = -c_- (1 - q)   otherwise          (a wrong answer costs more where wrong answers are rare)

broadcast over the response, c_+ = 5, c_- = 2. It replaces the group-centred r~ that the `rover` objective regresses
onto (the Math recipe uses GRPO's z-score instead).

Our reading: p and q are taken over the prompt's group (`scope="group"`), the group-relative comparison every other
r~ of ROVER makes (the authors' function builds the per-prompt score lists `id2score` and leaves them unused).
`reference_bug=True` reproduces the code: p and q over the whole batch (`sum(scores > 0) / bsz`), whatever the prompt.

Reference: yuxiaooye/ROVER @ ea5ce635ee03621035d6659845a387879cf20878
`Math/verl/trainer/ppo/core_algos.py::compute_rover_outcome_advantage` (L333); transcribed in
tests/anchors/formulas_rover.py.
"""
from __future__ import annotations

import torch

from workbench import registry
from workbench.advantages.base import broadcast, sequence_rewards
from workbench.advantages.group import group_stats
from workbench.batch import RolloutBatch

ROVER_TITLE = "Random Policy Valuation is Enough for LLM Reasoning with Verifiable Rewards"


def correct_share(correct: torch.Tensor, group: torch.Tensor, per_group: bool) -> torch.Tensor:
    """[B] share of correct responses in each row's group (or in the whole batch)."""
    c = correct.double()
    if not per_group:
        return c.mean().expand_as(c)
    mean, _, _ = group_stats(c, group)
    return mean


@registry.advantage(
    "rover", title=ROVER_TITLE,
    summary="ROVER's rarity-weighted outcome reward: correct +5(1 - p), wrong -2(1 - q), p / q the shares of correct "
            "/ wrong answers in the group (the authors' code: in the whole batch).",
    equation=r"\tilde r_i = \begin{cases} c_+(1-p) & R_i > 0\\ -c_-(1-q) & \text{else}\end{cases},\ q = 1 - p")
def rover_shaping(batch: RolloutBatch, *, correct_weight=5.0, wrong_weight=2.0, reference_bug=False):
    """r~ [B, T] of the module docstring from `rewards` (+ summed `token_rewards`), `group`, `mask`."""
    if not (correct_weight >= 0 and wrong_weight >= 0):
        raise ValueError(f"correct_weight and wrong_weight must be >= 0, got {correct_weight}, {wrong_weight}")
    correct = sequence_rewards(batch) > 0
    p = correct_share(correct, batch.group, per_group=not reference_bug)
    shaped = torch.where(correct, correct_weight * (1 - p), -wrong_weight * p)   # 1 - q = p
    return broadcast(shaped, batch.mask)
