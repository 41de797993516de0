"""ICPO's annealed expert bonus: a correct in-context steered sample earns more than a correct on-policy one, less
and less over training.

    R = 1 + beta max(0, 1 - t / T)   correct and steered (offpolicy_mask on the row)
    R = 1                            correct
    R = 0                            wrong

Early on the steered samples pull the policy towards the demonstrations' solutions; after T steps the bonus is
gone and steered and own samples count alike.

Reference: Celine-hxy/ICPO @ 287ac4849e8f79cd44033eee638474e6c69e1eb2,
`verl/recipe/icpo/utils/reward_score.py::compute_score_icpo_bonus` (L80-106: `decay_by_step(step_t,
method="linear", T=400, alpha=alpha)`, beta = 1; the `alpha=0.0115` argument is unused by the linear decay) and
`decay_by_step` (L72). "Correct" is the verifier's score 1 (the reference's `is_equiv` on the boxed answer); t is
our 0-based step. The reference's scripts call this reward shaping "icpo_rs"; Expert-Region Reject Sampling (keep a
steered sample only when correct), which the paper describes, is not in the code and not here (REFERENCES-AGENTS.md).

A reference bug, not reproduced: `ICPORewardManager` (`utils/reward_manager.py` L99) reads `current_step` from a
batch field that no code at that commit writes (`non_tensor_batch.get("current_step", 0)`), so the released code
always decays from step 0: its bonus stays 1 + beta for the whole run. Here t is the training step, as the paper's
annealing says (tests/anchors/test_icpo.py shows both).
"""
from __future__ import annotations

from dataclasses import replace

from workbench import registry

ICPO_TITLE = "Think Outside the Policy: In-Context Steered Policy Optimization"

ICPO_BONUS_LOGS = {
    "icpo/bonus": ("ICPO: the expert bonus beta max(0, 1 - t/T) a correct steered sample earns this step.",
                   "Falls linearly from beta to 0 over T steps, then stays 0."),
    "icpo/steered_correct": ("ICPO: share of in-context steered samples the verifier scores correct.",
                             "Above the on-policy accuracy early (the demonstrations help); 0: the policy cannot use "
                             "them."),
}


def linear_decay(step: int, horizon: int) -> float:
    """max(0, 1 - step / horizon) (the reference's `decay_by_step(..., method="linear", T=horizon)`)."""
    return max(0.0, 1.0 - step / horizon)


def check_bonus(*, beta=1.0, horizon=400, **_) -> None:
    if beta < 0 or horizon < 1:
        raise ValueError(f"beta={beta}, horizon={horizon}: the bonus needs beta >= 0 and horizon T >= 1 steps")


@registry.reward_shaping(
    "icpo", title=ICPO_TITLE,
    summary="Correct in-context steered samples earn 1 + beta max(0, 1 - t/T), correct ones 1, wrong ones 0 "
            "(beta = 1, T = 400).",
    equation=r"R = \begin{cases} 1 + \beta \max(0, 1 - t/T) & \text{correct, steered} \\ 1 & \text{correct} \\ "
             r"0 & \text{wrong} \end{cases}",
    reads=("scores", "offpolicy_mask"), provides=("rewards",), logs=ICPO_BONUS_LOGS, check=check_bonus)
def icpo_bonus(batch, ctx, *, beta=1.0, horizon=400):
    """Reads the verifier's `scores` [B] (correct = 1) and `offpolicy_mask` [B, T] (a steered row has any token
    marked); replaces `rewards`. beta = 0 gives the plain 0/1 reward. Logs icpo/bonus and icpo/steered_correct."""
    correct = batch.scores == 1
    steered = batch.offpolicy_mask.any(-1)
    bonus = beta * linear_decay(ctx.step, horizon)
    rewards = correct.to(batch.scores.dtype) * (1 + bonus * steered.to(batch.scores.dtype))
    ctx.metrics.update({"icpo/bonus": bonus,
                        "icpo/steered_correct": float(correct[steered].float().mean()) if steered.any() else 0.0})
    return replace(batch, rewards=rewards)
