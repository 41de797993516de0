"""PF-PPO: policy filtration, the batch resampled towards samples whose reward is reliable (verl's reweighting).

    w_i = |R_i|^p                               "pow" (p = weight_pow = 2)
    w_i = 1[R_i = max R or R_i = min R]         "max_min"    (~ the paper's Best-Worst)
    w_i = 0.4 if R_i = max R else 0.1           "max_random" (~ the paper's Best-Random)
    B rows drawn with replacement, P(i) = (w_i + 1e-8) / sum_j (w_j + 1e-8): the batch size is unchanged.

The max and min are the batch's (verl) or each prompt's group's (`scope="group"`, the paper's per-prompt
strategies). Reference: volcengine/verl @ b178a3c, `verl/trainer/ppo/core_algos.py::compute_pf_ppo_reweight_data`
(called in `ray_trainer.compute_advantage` after GAE when `use_pf_ppo`); the paper's OpenRLHF fork
swtheing/PF-PPO-RLHF @ 6b93abf, `openrlhf_filter/trainer/ppo_trainer.py::select_max_random`. Our code.

The paper picks the strategy by R^2 between the reward model's rewards and the true scores on the filtered set:
`r_squared` (the coefficient of determination of the least-squares line) is logged on the batch before and after.
"""
from __future__ import annotations

import torch

from workbench import registry

PF_PPO_TITLE = "Policy Filtration in RLHF to Fine-Tune LLM for Code Generation"
REWEIGHT_METHODS = ("pow", "max_min", "max_random")
SCOPES = ("batch", "group")
FLOOR = 1e-8  # verl: weights + 1e-8, clamped at 1e-8, so a batch of zero weights is drawn uniformly

PF_PPO_LOGS = {
    "pf_ppo/r2_all": ("PF-PPO: R^2 of the least-squares line between the rewards the policy is trained on and the "
                      "verifier's scores, over the step's whole batch (1 when they agree up to an affine map).",
                      "1 when the reward is the verifier's; lower: a learned or shaped reward disagrees with it."),
    "pf_ppo/r2": ("PF-PPO: R^2 between rewards and verifier scores over the resampled (filtered) batch.",
                  "At or above pf_ppo/r2_all: the filter keeps the samples whose reward is reliable."),
    "pf_ppo/distinct_rows": ("PF-PPO: share of the batch's rows that appear at least once in the resampled batch.",
                             "About 0.63 for equal weights (B draws from B rows), lower as the weights "
                             "concentrate; near 0: a few rows repeated, the update sees little data."),
}


def r_squared(x: torch.Tensor, y: torch.Tensor) -> float:
    """R^2 of y [N] on x [N]: 1 - SS_res / SS_tot of the least-squares line y ~ a + b x (= corr(x, y)^2 when both
    vary). Constant y: 1 (the line fits exactly); constant x with y varying: 0 (the line is y's mean)."""
    x, y = x.double(), y.double()
    if x.numel() == 0:
        return 1.0
    dx, dy = x - x.mean(), y - y.mean()
    ss_tot = float((dy * dy).sum())
    if ss_tot == 0.0:
        return 1.0
    sxx = float((dx * dx).sum())
    slope = float((dx * dy).sum()) / sxx if sxx > 0 else 0.0
    ss_res = float(((dy - slope * dx) ** 2).sum())
    return 1.0 - ss_res / ss_tot


def extremes(scores: torch.Tensor, group: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """([N] max, [N] min) of `scores` over the batch (group None) or each row's group."""
    if group is None:
        return scores.max().expand_as(scores), scores.min().expand_as(scores)
    _, dense = torch.unique(group, return_inverse=True)
    k = int(dense.max()) + 1
    hi = torch.full((k,), -torch.inf, dtype=scores.dtype).scatter_reduce(0, dense, scores, "amax")
    lo = torch.full((k,), torch.inf, dtype=scores.dtype).scatter_reduce(0, dense, scores, "amin")
    return hi[dense], lo[dense]


def pf_weights(scores: torch.Tensor, reweight_method: str = "pow", weight_pow: float = 2.0,
               group: torch.Tensor | None = None) -> torch.Tensor:
    """[N] resampling weights of the rows (before verl's 1e-8 floor); `group`: extremes per group, not batch."""
    if reweight_method == "pow":
        return scores.abs().pow(weight_pow)
    hi, lo = extremes(scores, group)
    if reweight_method == "max_min":
        return ((scores == hi) | (scores == lo)).to(scores.dtype)
    if reweight_method == "max_random":
        return torch.full_like(scores, 0.1).masked_fill(scores == hi, 0.4)
    raise ValueError(f"reweight_method must be one of {list(REWEIGHT_METHODS)}, got {reweight_method!r}")


def check_pf_ppo(*, reweight_method="pow", weight_pow=2.0, scope="batch", **_) -> None:
    if reweight_method not in REWEIGHT_METHODS:
        raise ValueError(f"reweight_method must be one of {list(REWEIGHT_METHODS)}, got {reweight_method!r}")
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {list(SCOPES)} (where max and min are taken), got {scope!r}")
    if isinstance(weight_pow, bool) or not isinstance(weight_pow, (int, float)) or not 0 <= weight_pow <= 16:
        raise ValueError(f"weight_pow must be a number in [0, 16] (the power p of |R|^p; 0 draws uniformly, verl's "
                         f"default 2), got {weight_pow!r}")


@registry.group_transform(
    "pf-ppo", title=PF_PPO_TITLE,
    summary="Policy filtration: the batch is redrawn with replacement (same size) with weights favouring samples "
            "whose reward is reliable: |R|^2 (verl's default), the max and min reward only (Best-Worst), or 0.4 "
            "for the max and 0.1 otherwise (Best-Random). At our scale: R is the step's reward and the R^2 "
            "diagnostic compares it with the verifier's score (1 unless reward functions shape it).",
    equation=r"i_1..i_B \sim \mathrm{Cat}\big(w + 10^{-8}\big),\quad w_i = |R_i|^p \ \text{or}\ "
             r"\mathbb{1}[R_i \in \{\max R, \min R\}] \ \text{or}\ 0.4\,\mathbb{1}[R_i = \max R] + 0.1\,"
             r"\mathbb{1}[R_i \ne \max R]",
    reads=("rewards", "scores", "group"), logs=PF_PPO_LOGS, check=check_pf_ppo,
    choices={"reweight_method": REWEIGHT_METHODS, "scope": SCOPES})
def pf_ppo(batch, ctx, *, reweight_method="pow", weight_pow=2.0, scope="batch"):
    """Reads `rewards` (verl's summed token_level_scores: the reward before any KL in the reward, which our
    reward_shaping adds later), `scores` (the verifier's, the "true score" of the R^2 diagnostic) and `group`.
    Returns B rows drawn with replacement (`ctx.generator()`: reproducible per step), duplicates included, in
    draw order.

    reweight_method / weight_pow: verl's (defaults "pow", 2). scope: "batch" takes max and min over the batch, as
    verl does; "group" over each prompt's samples, as the paper's Best-Worst / Best-Random pick per prompt (a
    resampling, not the OpenRLHF fork's keep-exactly-two). verl reweights after GAE; here the rows are drawn before
    the forward passes, so the critic's values and GAE are computed on the drawn rows: the same per-row
    advantages, only the batch whitening of GAE sees the drawn batch.
    Logs pf_ppo/r2_all, pf_ppo/r2 and pf_ppo/distinct_rows."""
    check_pf_ppo(reweight_method=reweight_method, weight_pow=weight_pow, scope=scope)
    batch.require("rewards")
    if batch.size == 0:
        return batch
    rewards = batch.rewards.double()
    truth = batch.scores.double() if batch.scores is not None else rewards
    weights = pf_weights(rewards, reweight_method, weight_pow, batch.group if scope == "group" else None)
    weights = (weights + FLOOR).clamp(min=FLOOR)
    drawn = torch.multinomial(weights, batch.size, replacement=True, generator=ctx.generator())
    ctx.metrics.update({"pf_ppo/r2_all": r_squared(rewards, truth),
                        "pf_ppo/r2": r_squared(rewards[drawn], truth[drawn]),
                        "pf_ppo/distinct_rows": int(torch.unique(drawn).numel()) / batch.size})
    return batch.select(drawn)
