"""ARLCP: penalties on the reflection count and the length of correct responses, relative to the other correct
responses to the same prompt.

For a correct response with c reflection words and L tokens, against the correct responses of its group
(mean/std of c and of L, Bessel std; mean 0, std 1 when there are none, std 1 when there is one):

    r = 1 - w1 sigma((c - mu_c) / (sigma_c + eps)) - w2 sigma((L - mu_L) / (sigma_L + eps)),   w2 = 0.2 - w1

with w1 = 0.05 / 0.10 / 0.15 for c <= 40 / 40 < c <= 80 / c > 80: the more a response reflects, the more of the
0.2 budget goes to its reflection penalty. Incorrect responses get 0 in ARLCP's score; here, a reward shaping,
they keep their reward (the verifier's 0 when it is the whole reward); badly formatted ones get 0 (`require_think`).

Reference: ZeweiYu1/ARLCP `src/rm.py::arlcp_rm` (the score) and `verl/workers/reward_manager/naive.py` (the group
statistics, keyed by the prompt text).
"""
from __future__ import annotations

import re
from dataclasses import replace

import torch

from workbench import registry
from workbench.advantages.group import group_stats
from workbench.rewards import base

ARLCP_TITLE = ("Stop Unnecessary Reflection: Training LRMs for Efficient Reasoning with Adaptive Reflection and "
               "Length Coordinated Penalty")
# ARLCP's keyword list, in its order (the alternation tries them left to right: "alternatively" before
# "alternative", and "double-check" is one match, its "check" is not counted again).
REFLECTION_WORDS = ("wait", "alternatively", "hold on", "another thought", "verify", "think again", "but", "however",
                    "alternative", "check", "double-check", "oh", "hmm")
REFLECTION = re.compile(r"\b(?:" + "|".join(re.escape(w) for w in REFLECTION_WORDS) + r")\b", re.IGNORECASE)


def reflection_count(text: str) -> int:
    """Number of reflection words in `text` (whole words, any case)."""
    return sum(1 for _ in REFLECTION.finditer(text))


def think_format_ok(text: str) -> bool:
    """ARLCP's format rule for R1-style outputs: no opening <think> (the template opens it) and one </think>."""
    return "<think>" not in text and text.count("</think>") == 1


def reflection_weight(counts: torch.Tensor, *, brackets=(40, 80), weights=(0.05, 0.10, 0.15)) -> torch.Tensor:
    """w1 [B]: weights[k] for the bracket of each count (c <= 40, 40 < c <= 80, c > 80 by default)."""
    bounds = torch.tensor(brackets, dtype=torch.float64)
    index = torch.bucketize(counts.to(torch.float64), bounds, right=False)  # c <= b_0 -> 0, b_0 < c <= b_1 -> 1
    return torch.tensor(weights, dtype=torch.float64)[index]


def correct_stats(x: torch.Tensor, correct: torch.Tensor, group: torch.Tensor):
    """Per-row (mean, std) [B] of x over the correct rows of the row's group (Bessel std; a group with one
    correct row has std 1), for the rows in `correct`; every row outside `correct` gets (0, 1) (its penalty is
    never used). Only correct rows' values enter the statistics."""
    mean = torch.zeros_like(x, dtype=torch.float64)
    std = torch.ones_like(x, dtype=torch.float64)
    if bool(correct.any()):
        m, s, n = group_stats(x[correct].to(torch.float64), group[correct], unbiased=True)
        mean[correct], std[correct] = m, torch.where(n > 1, s, torch.ones_like(s))
    return mean, std


def arlcp_penalty(counts: torch.Tensor, lengths: torch.Tensor, correct: torch.Tensor, group: torch.Tensor, *,
                  stats_rows: torch.Tensor | None = None, total_weight=0.2, brackets=(40, 80),
                  weights=(0.05, 0.10, 0.15), eps=1e-6) -> torch.Tensor:
    """w1 sigma(z_c) + w2 sigma(z_L) [B] on correct rows, 0 elsewhere; counts, lengths [B], correct [B] bool,
    group [B]. `stats_rows` [B] bool: the rows the group statistics are taken over (default: the correct ones;
    it must contain them)."""
    stats_rows = correct if stats_rows is None else stats_rows
    if bool((correct & ~stats_rows).any()):
        raise ValueError("arlcp: stats_rows must contain every correct row")
    counts, lengths = counts.to(torch.float64), lengths.to(torch.float64)
    mu_c, sd_c = correct_stats(counts, stats_rows, group)
    mu_l, sd_l = correct_stats(lengths, stats_rows, group)
    w1 = reflection_weight(counts, brackets=brackets, weights=weights)
    w2 = total_weight - w1  # the reflection term takes more of the fixed budget as c grows
    term = w1 * torch.sigmoid((counts - mu_c) / (sd_c + eps)) + w2 * torch.sigmoid((lengths - mu_l) / (sd_l + eps))
    return torch.where(correct, term, torch.zeros_like(term))


def check_arlcp(total_weight, brackets, weights, eps) -> None:
    if len(weights) != len(brackets) + 1:
        raise ValueError(f"arlcp: weights needs one entry per bracket, len(brackets) + 1 = {len(brackets) + 1}, "
                         f"got {len(weights)}")
    if list(brackets) != sorted(brackets):
        raise ValueError(f"arlcp: brackets must be increasing, got {brackets}")
    if not all(0 <= w <= total_weight for w in weights):
        raise ValueError(f"arlcp: every reflection weight must lie in [0, total_weight={total_weight}] so that "
                         f"w2 = total_weight - w1 >= 0, got {weights}")
    if not eps > 0:
        raise ValueError(f"arlcp: eps must be > 0, got {eps}")


ARLCP_LOGS = {
    "arlcp/reflections": ("ARLCP: mean count of reflection words (wait, but, check, hmm, ...) per response.",
                          "Near 0 on the toy tasks (short digit answers hold no reflection words); on reasoning "
                          "models it falls as unnecessary reflection is trained away. Rising: the penalty is too "
                          "weak."),
    "arlcp/penalty": ("ARLCP: mean penalty w1 sigma(z_c) + w2 sigma(z_L) subtracted from the correct responses' "
                      "reward.",
                      "In (0, 0.2): exactly 0.1 for a response at its group's means (a lone correct answer too). "
                      "Stuck near 0.2: correct answers sit far above their group's reflection and length."),
}


@registry.reward_shaping(
    "arlcp", title=ARLCP_TITLE,
    summary="Correct responses lose w1 sigma(z_reflections) + w2 sigma(z_length) (z against the group's correct "
            "responses, w1 + w2 = 0.2, w1 = 0.05/0.10/0.15 by reflection count); incorrect ones keep their reward.",
    equation=r"r = \mathbb 1[\text{correct}]\Big(1 - w_1\,\sigma\big(\tfrac{c - \mu_c}{\sigma_c + \epsilon}\big) "
             r"- w_2\,\sigma\big(\tfrac{L - \mu_L}{\sigma_L + \epsilon}\big)\Big),\ w_2 = 0.2 - w_1",
    reads=("rewards", "scores", "group", "completions", "mask"), provides=("rewards",), logs=ARLCP_LOGS)
def arlcp_rewards(batch, ctx, *, total_weight=0.2, brackets=(40, 80), weights=(0.05, 0.10, 0.15), eps=1e-6,
                  require_think=False, reference_bug=False):
    """Subtracts `arlcp_penalty` from the reward of each correct row (`scores` >= 1, the verifier's verdict);
    with the verifier's score as the whole reward (task_reward 1, no reward functions) this is ARLCP's score:
    0 if wrong, 1 - penalty if right. c = `reflection_count` of the completion, L = its token count.

    Defaults are ARLCP's (`arlcp_rm`: 0.2 total, brackets 40/80, w1 0.05/0.10/0.15, eps 1e-6). require_think:
    ARLCP's format rule (`think_format_ok`: exactly one </think>, no <think>) for R1-style outputs; a row that
    breaks it gets reward 0 even if its answer is right. Off by default: the toy tasks have no think tags.
    reference_bug=True takes the group statistics over every row whose answer is right, badly formatted ones
    included, as ARLCP's reward manager does (it checks the answer only), while the score gives those rows 0.
    Logs arlcp/reflections (mean c over the batch) and arlcp/penalty (mean penalty over the correct rows).
    """
    check_arlcp(total_weight, brackets, weights, eps)
    if batch.scores is None:
        raise ValueError("arlcp reads batch.scores (the environment's verdict, 1.0 = solved); the batch has none")
    if len(batch.completions) != batch.size:
        raise ValueError(f"arlcp reads batch.completions (the texts whose reflection words it counts): the batch has "
                         f"{len(batch.completions)} for {batch.size} rows")
    answered = base.solved(batch.scores, expected=batch.size)
    formatted = torch.tensor([think_format_ok(t) for t in batch.completions]) if require_think \
        else torch.ones_like(answered)
    correct = answered & formatted
    counts = torch.tensor([reflection_count(t) for t in batch.completions], dtype=torch.float64)
    penalty = arlcp_penalty(counts, batch.lengths, correct, batch.group,
                            stats_rows=answered if reference_bug else correct, total_weight=total_weight,
                            brackets=brackets, weights=weights, eps=eps)
    rewards = batch.rewards.to(torch.float64) - penalty
    rewards = torch.where(answered & ~formatted, torch.zeros_like(rewards), rewards)  # bad format scores 0
    ctx.metrics["arlcp/reflections"] = float(counts.mean())
    ctx.metrics["arlcp/penalty"] = float(penalty[correct].mean()) if bool(correct.any()) else 0.0
    return replace(batch, rewards=rewards.to(batch.rewards.dtype))
