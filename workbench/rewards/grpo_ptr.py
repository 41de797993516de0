"""GRPO-PTR (EmotionThinker): a reasoning reward brought in progressively and weighted by how far it can be trusted.

    R_i = R_outcome,i + R_format,i + lambda(t) gamma_g R_reason,i
    gamma_g = 1 if mean R_reason(correct) >= mean R_reason(incorrect) in group g, else exp(mu_correct - mu_incorrect)
    lambda(t) = lambda_max min(1, t / (warmup_frac T))

The paper is abstract-only for this reward (no public reward code: dingdongwang/EmotionThinker ships inference
and data code only). Our reading, from the catalog: the closest known form (Trust-GRPO's group trust weight) and
a linear ramp over the first 30% of training to lambda_max = 0.5. R_outcome + R_format are the recipe's rewards
(`batch.rewards`); correctness is the environment's verdict (`batch.scores` >= 1). R_reason comes from a
multi-criteria reward model in the paper; here from `judge`, by default `toy_judge`, a deterministic rule-based
stand-in (toy scale), so a model judge can be plugged in.
"""
from __future__ import annotations

import math
from dataclasses import replace

import torch

from workbench import registry
from workbench.advantages.group import group_index, group_stats
from workbench.rewards import base
from workbench.rewards.accuracy import NUMBER, as_number, final_answer, last_number
from workbench.rewards.format import tag_layout_ok
from workbench.rewards.reflection import blocks
from workbench.rewards.repetition import repeated_fraction, words

PTR_TITLE = "EmotionThinker: Prosody-Aware Reinforcement Learning for Explainable Speech Emotion Reasoning"


def toy_judge(prompts: list[str], completions: list[str]) -> list[float]:
    """Toy stand-in for the multi-criteria reasoning reward model, in [0, 1]: the mean of three rule-based criteria
    of the reasoning (the first `<think>` block, else the whole completion):
      structure    the completion is a closed `<think>` block followed by the answer (1 / 0);
      consistency  the final answer's number occurs in the reasoning (1 / 0; 0 when the answer has none, and 0
                   without a `<think>` block: the answer trivially occurs in a reasoning that is the whole text);
      fluency      1 - the repeated share of the reasoning's word 3-grams.
    `prompts` are unused by these rules (a model judge reads them)."""
    out = []
    for text in completions:
        thinks = blocks(text, "think")
        reasoning = thinks[0] if thinks else text
        structure = float(tag_layout_ok(text, ("think",), strip=True))
        answer = last_number(final_answer(text)[0]) if thinks else None
        consistency = float(answer is not None and any(as_number(m.group()) == answer
                                                        for m in NUMBER.finditer(reasoning)))
        fluency = 1.0 - repeated_fraction(words(reasoning), 3)
        out.append((structure + consistency + fluency) / 3.0)
    return out


def progressive_weight(step: int, total: int | None, *, lam_max=0.5, warmup_frac=0.3) -> float:
    """lambda(t) = lam_max min(1, t / (warmup_frac T)): 0 at the first step, lam_max from 30% of training on.
    The ramp needs the run's length T; without it (T None or 0) only warmup_frac = 0 (constant lam_max) works."""
    if warmup_frac == 0:
        return float(lam_max)
    if not total:
        raise ValueError(f"grpo-ptr: lambda(t) = lam_max min(1, t / (warmup_frac T)) needs the run's length T "
                         f"(total_steps), got {total!r}; pass total_steps, or warmup_frac=0 for a constant lam_max")
    return float(lam_max) * min(1.0, step / (warmup_frac * total))


def group_means_over(x: torch.Tensor, rows: torch.Tensor, group: torch.Tensor) -> torch.Tensor:
    """Per-group [K] mean of x [B] over the group's `rows` [B] bool (NaN for a group without any), groups in
    `group_index` order."""
    dense, counts = group_index(group)
    out = torch.full((counts.shape[0],), float("nan"), dtype=x.dtype)
    if bool(rows.any()):
        out[dense[rows]] = group_stats(x[rows], group[rows])[0]  # one value per group, repeated per row
    return out


def group_trust(reason: torch.Tensor, correct: torch.Tensor, group: torch.Tensor) -> torch.Tensor:
    """gamma_g per group [K] from reasoning scores [B] and correctness [B] bool within each group [B]: 1 when the
    correct rows' mean score is at least the incorrect rows', else exp(mu_correct - mu_incorrect) in (0, 1).
    Our reading: a group that is all correct or all incorrect gives no evidence against the judge, gamma = 1."""
    gap = group_means_over(reason, correct, group) - group_means_over(reason, ~correct, group)  # NaN: one class
    return torch.where(gap < 0, torch.exp(gap), torch.ones_like(gap))  # NaN < 0 is False: gamma = 1


def trust_weights(reason: torch.Tensor, correct: torch.Tensor, group: torch.Tensor) -> torch.Tensor:
    """gamma_g per row [B] (`group_trust` of the row's group)."""
    return group_trust(reason, correct, group)[group_index(group)[0]]


def judge_scores(judge, prompts: list[str], completions: list[str], dtype) -> torch.Tensor:
    """R_reason [B] from `judge(prompts, completions)`; a clear error for a wrong length or a score that is not a
    finite number (python, numpy and one-element torch numbers are read with float())."""
    if len(prompts) != len(completions):
        raise ValueError(f"grpo-ptr: the batch has {len(prompts)} prompts for {len(completions)} completions; the "
                         "judge reads one prompt per completion")
    values = list((judge or toy_judge)(list(prompts), list(completions)))
    if len(values) != len(completions):
        raise ValueError(f"grpo-ptr: judge returned {len(values)} scores for {len(completions)} completions")
    numbers = []
    for v in values:
        try:
            x = None if isinstance(v, (str, bytes)) else float(v)  # "0.5" is text, not a score
        except (TypeError, ValueError, RuntimeError):  # None, a list, a tensor of several elements
            x = None
        if x is None or not math.isfinite(x):
            raise ValueError(f"grpo-ptr: judge scores must be finite numbers, got {v!r} (scores {values[:10]})")
        numbers.append(x)
    return torch.tensor(numbers, dtype=dtype)


GRPO_PTR_LOGS = {
    "grpo_ptr/lambda": ("GRPO-PTR: this step's weight lambda(t) of the reasoning reward (0 -> lam_max over the first "
                        "30% of training).",
                        "0 at step 0, a straight ramp to lam_max (0.5) at 30% of the steps, then flat."),
    "grpo_ptr/gamma_mean": ("GRPO-PTR: mean group trust weight gamma_g (1 when the judge scores right answers' "
                            "reasoning at least as high as wrong ones').",
                            "Near 1. Falling: in many groups the judge prefers the reasoning of wrong answers, so "
                            "its reward is discounted (a judge the policy is learning to fool)."),
    "grpo_ptr/reason_mean": ("GRPO-PTR: mean reasoning score R_reason from the judge (the toy judge's is in [0, 1]).",
                             "Slowly rising. Rising fast while accuracy falls: the policy games the judge "
                             "(gamma_mean should fall with it)."),
}


@registry.reward_shaping(
    "grpo-ptr", title=PTR_TITLE,
    summary="Adds lambda(t) gamma_g R_reason: a reasoning reward (toy stand-in: rule-based judge) ramped in over "
            "the first 30% of training, times a group trust weight that shrinks when the judge prefers wrong "
            "answers.",
    equation=r"R_i = R_{out,i} + R_{fmt,i} + \lambda(t)\,\gamma_g R_{reason,i},\ \gamma_g = \min\big(1, "
             r"e^{\mu_{correct} - \mu_{incorrect}}\big),\ \lambda(t) = \lambda_{max}\min\big(1, \tfrac{t}{0.3T}\big)",
    reads=("rewards", "scores", "group", "completions", "prompts"), provides=("rewards",), logs=GRPO_PTR_LOGS)
def grpo_ptr_rewards(batch, ctx, *, lam_max=0.5, warmup_frac=0.3, judge=None):
    """rewards [B] += lambda(ctx.step / ctx.total_steps) * gamma_g * judge score. lam_max = 0.5 and warmup_frac =
    0.3 are the catalog's reading (`unverified`). judge: None (the rule-based `toy_judge`) or a callable
    judge(prompts, completions) -> scores, e.g. a reward model. Logs grpo_ptr/lambda, grpo_ptr/gamma_mean (over
    groups) and grpo_ptr/reason_mean."""
    if not lam_max >= 0:
        raise ValueError(f"grpo-ptr: lam_max must be >= 0, got {lam_max!r}")
    if not 0 <= warmup_frac <= 1:
        raise ValueError(f"grpo-ptr: warmup_frac must be in [0, 1], got {warmup_frac!r}")
    if batch.scores is None:
        raise ValueError("grpo-ptr reads batch.scores (the environment's verdict, 1.0 = solved); the batch has none")
    if judge is not None and not callable(judge):
        raise ValueError(f"grpo-ptr: judge must be None or a callable judge(prompts, completions), got {judge!r}")
    lam = progressive_weight(ctx.step, ctx.total_steps, lam_max=lam_max, warmup_frac=warmup_frac)
    reason = judge_scores(judge, batch.prompts, batch.completions, torch.float64)              # [B]
    per_group = group_trust(reason, base.solved(batch.scores, expected=batch.size), batch.group)  # [K]
    gamma = per_group[group_index(batch.group)[0]]                                              # [B]
    ctx.metrics.update({"grpo_ptr/lambda": lam, "grpo_ptr/gamma_mean": float(per_group.mean()),
                        "grpo_ptr/reason_mean": float(reason.mean())})
    return replace(batch, rewards=batch.rewards + (lam * gamma * reason).to(batch.rewards.dtype))
