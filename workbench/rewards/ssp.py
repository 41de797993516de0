"""SSP's proposer reward (Search Self-play): the proposer is paid by how often the solver fails its question.

    p_j = (1/n) sum_i [R_solver(j, i) > 0]               success rate of the solver's n attempts at question j
    "1-acc" (default):          r_j = 1 - p_j
    "intermediate_difficulty":  r_j = 4 (l + p_j)(r - p_j)  if 0 < p_j < 1,  else 0     (l = 0, r = 1: 4 p (1 - p))
    "format_only":              r_j = 1
    invalid proposal:           r_j = format_penalty     (nothing extracted, or the RAG check failed: no question)

With l = 0, r = 1 and a penalty in [0, 1] every reward is in [0, 1]: "1-acc" gives the most, 1, to a question no
attempt solved and 0 to one every attempt solved; "intermediate_difficulty" peaks (1) at p = 1/2 and gives 0 to a
question solved always or never (too easy, or unsolvable as posed).

Reference: Alibaba-Quark/SSP @ b4797e1854379ed74bcd9b56bcdcdcbcb4feeeec, `quarl/trainer/ppo/ssp_ray_trainer.py::
SSPRayPPOTrainer._compute_proposer_rewards` (L1317-): success rate `(solver_rewards_grouped > 0).float().mean(dim=1)`
over `rollout_n` attempts, the three reward types, `format_penalty` on a failed extraction (tests/anchors/test_ssp.py
checks agreement with a transcription). Defaults are `examples/train_ssp.sh`'s: reward_type 1-acc, left 0, right 1,
format_penalty 0 (the config file's default penalty is -1).

This module is the math. Where p comes from is the group transform `ssp` (workbench/transforms/ssp.py): it rolls the
solver out on each valid proposal and calls `proposer_rewards`. The registered reward reads p from a `success_rate`
column, which only that transform supplies: listed in a recipe's `rewards`, before any solver has run, it refuses.
"""
from __future__ import annotations

import math

import torch

from workbench import registry
from workbench.rewards import base

SSP_TITLE = "Search Self-play: Pushing the Frontier of Agent Capability without Supervision"
REWARD_TYPES = ("1-acc", "intermediate_difficulty", "format_only")  # the reference's `reward_type` names


def check_ssp(*, reward_type="1-acc", left=0.0, right=1.0, format_penalty=0.0, **_) -> None:
    if reward_type not in REWARD_TYPES:
        raise ValueError(f"reward_type={reward_type!r} is not one of {list(REWARD_TYPES)}")
    for name, value in (("left", left), ("right", right), ("format_penalty", format_penalty)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"{name}={value!r} must be a finite number (the reference's defaults: left 0, right 1, "
                             "format_penalty 0 in its script)")


def success_rate(solver_rewards: torch.Tensor) -> torch.Tensor:
    """p [Q] of the solver's rewards [Q, n] (question j's n attempts in row j): the share with reward > 0."""
    return (solver_rewards > 0).double().mean(dim=1)


def one_minus_acc(p: torch.Tensor) -> torch.Tensor:
    """1 - p: the harder the question for the solver, the more the proposer gets."""
    return 1.0 - p


def intermediate_difficulty(p: torch.Tensor, left: float = 0.0, right: float = 1.0) -> torch.Tensor:
    """4 (l + p)(r - p) where 0 < p < 1, else 0: a question solved always or never earns nothing."""
    inside = (p > 0) & (p < 1)
    return torch.where(inside, 4.0 * (left + p) * (right - p), torch.zeros_like(p))


def proposer_rewards(p: torch.Tensor, valid: torch.Tensor, *, reward_type: str = "1-acc", left: float = 0.0,
                     right: float = 1.0, format_penalty: float = 0.0) -> torch.Tensor:
    """r [Q] (float64) of Q proposals: the reward type's function of p [Q] where `valid` [Q] (bool), else the
    penalty. p of an invalid proposal is not read (it has no solver attempts)."""
    check_ssp(reward_type=reward_type, left=left, right=right, format_penalty=format_penalty)
    p = torch.where(valid, p.double(), torch.zeros_like(p, dtype=torch.float64))  # an invalid row's p may be NaN
    if reward_type == "intermediate_difficulty":
        r = intermediate_difficulty(p, left, right)
    elif reward_type == "format_only":
        r = torch.ones_like(p)
    else:
        r = one_minus_acc(p)
    return torch.where(valid, r, torch.full_like(r, float(format_penalty)))


@registry.reward(
    "ssp", title=SSP_TITLE, family="multiagent",
    summary="Search self-play's proposer reward from its question's solver success rate p over n attempts: 1 - p "
            "(default), or 4(l + p)(r - p) for 0 < p < 1 and 0 otherwise, or 1 (format only); an invalid proposal "
            "(no question, or one the documents it retrieved do not answer) gets format_penalty. p comes from the "
            "group transform ssp, which runs the solver.",
    equation=r"p_j = \tfrac{1}{n}\textstyle\sum_i [R^{solve}_{j,i} > 0],\quad r_j = \begin{cases} 1 - p_j & "
             r"\text{1-acc} \\ 4(l + p_j)(r - p_j)\,[0 < p_j < 1] & \text{intermediate} \\ "
             r"\text{format penalty} & \text{invalid} \end{cases}",
    check=check_ssp, choices={"reward_type": REWARD_TYPES})
def ssp_reward(completions, *, reward_type="1-acc", left=0.0, right=1.0, format_penalty=0.0, **columns) -> list[float]:
    """One reward per proposer row from the columns `success_rate` (p per row, None where the proposal was invalid;
    given by the group transform ssp) and `scores` (the proposer environment's verdict: >= 1 valid)."""
    check_ssp(reward_type=reward_type, left=left, right=right, format_penalty=format_penalty)
    rates = columns.get("success_rate")
    if rates is None:
        raise ValueError("reward 'ssp' needs the solver's success rate of each proposal (a success_rate column), which "
                         "only the group transform ssp computes (it runs the solver on the proposals): put "
                         "group_transforms=[use('ssp')] in the recipe instead of listing 'ssp' among its rewards")
    valid = [bool(v) for v in base.solved(base.column(columns, "scores", required="ssp"), len(completions))]
    if len(rates) != len(valid):
        raise ValueError(f"success_rate has {len(rates)} rows for {len(valid)} completions")
    valid_t = torch.tensor(valid, dtype=torch.bool) & torch.tensor([r is not None for r in rates], dtype=torch.bool)
    p = torch.tensor([math.nan if r is None else float(r) for r in rates], dtype=torch.float64)
    return proposer_rewards(p, valid_t, reward_type=reward_type, left=left, right=right,
                            format_penalty=format_penalty).tolist()
