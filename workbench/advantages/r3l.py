"""R³L's advantage: a group baseline over the exploration rows, then Positive Amplification of the positive side.

    A_i = R_i - mean_G R                      baseline="opmd" (the released runs: `opmd_reweight_adv`)
    A_i = (R_i - mean_G R) / (std_G R + eps)  baseline="grpo" (the paper's eq. for A(tau); `grpo_reweight_adv`)
    G = the prompt's exploration rows (base episodes and their retries under the plain prompt); a group of one has
        mean 0 (and std 1), as the reference's
    mode="code" (default, what ran):  A^ = 1.0 if R >= r_max;  alpha A if A >= 0;  A otherwise
    mode="paper":                     A^ = alpha if R >= r_max;  alpha A if A > 0;  A otherwise
    D_retry rows (verified corrections under the guided prompt, `rollout:r3l`): A^ = 1 (their SFT term)

When failures dominate a group, the few successes' positive advantages are small against the many negatives; scaling
the positive side by alpha (3) lets the constructive gradient dominate while negatives stay as they are.

Reference: shiweijiezero/R3L @ d503f6c6b0725a4e8a39311e6f9b71de6bb2f64b,
`trinity/algorithm/advantage_fn/opmd_advantage.py::OPMDReweightAdvGroupAdvantage.calculate_group_advantage`
(L150-190, registered `opmd_reweight_adv`: the algorithm of examples/R3L/*/opmd_R3L_*.yaml) and
`trinity/algorithm/advantage_fn/grpo_advantage.py::GRPOReweightAdvGroupAdvantage.calculate_group_advantage`
(L239-298, `grpo_reweight_adv`); groups are `group_by(exps, id_type="task")`, the workflow's "_explore" task id for
the base and distill rows, "_retry_i" (one row each) for the D_retry rows. Paper: shiweijiezero/Trinity-RFT
`writing/ARR_EMNLP_R3L/paper_arxiv/main.tex`, eq. `reweight_advantage`. Transcribed in tests/anchors/formulas_r3l.py.

Paper and code disagree; `mode` gives both, the default is the code's, which is what the released runs ran:
- A success gets exactly 1.0 in the code (`if exp.reward >= 1.0: score = 1.0`), alpha (3) in the paper. Neither
  looks at the group: an all-success group gets A^ = 1 (code) or alpha (paper) on every row where GRPO gives 0.
  This is the documented reference behaviour, kept in both modes.
- The code scales `score >= 0` (0 included, harmlessly: 3 x 0 = 0), the paper A > 0.
- "R = R_max" is read as R >= r_max with r_max the task's maximum reward (default 1.0, the code's literal); the
  paper's sentence "trajectories achieving the maximum reward in the group" would also give alpha to an all-failed
  group's zeros, which its equation (R = R_max) does not say. `r_max=None` drops the clause: with alpha = 1 the
  advantage is then exactly GRPO's (baseline="grpo") or R - mean (the catalog's test 1).
A row with R >= r_max and A < 0 (rewards above r_max in its group) is set to 1 (code) or alpha (paper): the one
case where the amplification changes a sign, as in the reference; with rewards in [0, r_max] it never does.
The reference's OPMD `logavgexp` baseline and GRPO's batch-level std (`std_cal_level="batch"`) are not provided (the
R3L runs use "mean" and "group"). The reference's rewards are float32; here the batch's dtype (float64 in tests).
"""
from __future__ import annotations

import torch

from workbench import registry
from workbench.advantages.base import broadcast, sequence_rewards
from workbench.advantages.group import keyed_normalize
from workbench.batch import RolloutBatch

MODES = ("code", "paper")
R3L_TITLE = ("R^3L: Reflect-then-Retry Reinforcement Learning with Language-Guided Exploration, Pivotal Credit, and "
             "Positive Amplification")
PIVOT, ROLE = "pivot", "r3l_role"  # the turn_info keys every row's steps carry (set by rollout:r3l)
BASE, RETRY, SFT = "base", "retry", "sft"
BASELINES = ("opmd", "grpo")


def row_role(steps: list[dict]) -> str:
    """A row's R3L role from its turn_info (a row of another rollout is a base row)."""
    return steps[0].get(ROLE, BASE) if steps else BASE


def row_pivot(steps: list[dict]) -> int:
    """A row's k_pivot from its turn_info (0: nothing masked)."""
    return int(steps[0].get(PIVOT, 0)) if steps else 0


def check_r3l_advantage(*, mode="code", baseline="opmd", alpha=3.0, r_max=1.0, eps=1e-6) -> None:
    if mode not in MODES:
        raise ValueError(f"mode={mode!r}: give 'code' (success -> 1.0, the released runs) or 'paper' (success -> "
                         "alpha)")
    if baseline not in BASELINES:
        raise ValueError(f"baseline={baseline!r}: give 'opmd' (R - mean, the released runs) or 'grpo' (the group "
                         "z-score)")
    if not isinstance(alpha, (int, float)) or isinstance(alpha, bool) or alpha < 1:
        raise ValueError(f"alpha={alpha!r}: the positive amplification factor must be a number >= 1 (1: none; the "
                         "paper's 3.0)")
    if r_max is not None and (not isinstance(r_max, (int, float)) or isinstance(r_max, bool)):
        raise ValueError(f"r_max={r_max!r}: give the task's maximum reward (1.0) or null for no success clause")
    if not eps > 0:
        raise ValueError(f"eps={eps!r}: the std's epsilon must be > 0 (the reference's 1e-6)")


def group_advantage(rewards: torch.Tensor, keys: list, baseline: str, eps: float) -> torch.Tensor:
    """[B] R - mean, or (R - mean) / (std + eps) with Bessel's std, within each key's rows; a key of one row has mean 0
    and std 1 (the reference's `len(exps) == 1` branch)."""
    return keyed_normalize(rewards, keys, scale=baseline == "grpo", eps=eps, singletons="keep")


def amplify(advantages: torch.Tensor, rewards: torch.Tensor, *, mode: str, alpha: float,
            r_max: float | None) -> torch.Tensor:
    """[B] Positive Amplification of advantages [B] given rewards [B] (module docstring)."""
    positive = advantages >= 0 if mode == "code" else advantages > 0
    out = torch.where(positive, alpha * advantages, advantages)
    if r_max is None:
        return out
    success = torch.ones_like(out) if mode == "code" else torch.full_like(out, float(alpha))
    return torch.where(rewards >= r_max, success, out)


@registry.advantage(
    "r3l", title=R3L_TITLE,
    summary="Group baseline over the exploration rows (OPMD's R - mean, or GRPO's z-score), then Positive "
            "Amplification: successes 1.0 (code) or alpha (paper), other positive advantages times alpha = 3, "
            "negatives unchanged; verified corrections (D_retry) get A = 1.",
    equation=r"\hat A = \begin{cases} 1\ (\text{code}) \,/\, \alpha\ (\text{paper}) & R \ge R_{max} \\ "
             r"\alpha A & A > 0 \\ A & \text{otherwise} \end{cases},\quad A = R - \bar R_G\ \text{or}\ "
             r"\frac{R - \bar R_G}{\sigma_G + \epsilon}",
    reads=("rewards", "group", "mask", "turn_info"), choices={"mode": MODES, "baseline": BASELINES},
    check=check_r3l_advantage)
def r3l_advantage(batch: RolloutBatch, *, mode="code", baseline="opmd", alpha=3.0, r_max=1.0, eps=1e-6):
    """Reads `rewards` [B], `group` [B], `mask` [B, T] and the rows' roles in `turn_info` (`rollout:r3l`; a batch of
    another rollout is all exploration rows); returns [B, T]. Defaults: the released runs' `opmd_reweight_adv`."""
    check_r3l_advantage(mode=mode, baseline=baseline, alpha=alpha, r_max=r_max, eps=eps)
    rewards = sequence_rewards(batch)                                                      # [B]
    sft = torch.tensor([row_role(steps) == SFT for steps in batch.turn_info] if batch.turn_info else
                       [False] * batch.size)                                               # [B] D_retry rows
    keys = list(zip(batch.group.tolist(), sft.tolist()))  # D_retry rows never enter an exploration group's statistics
    amplified = amplify(group_advantage(rewards, keys, baseline, eps), rewards, mode=mode, alpha=alpha, r_max=r_max)
    return broadcast(torch.where(sft, torch.ones_like(amplified), amplified), batch.mask)
