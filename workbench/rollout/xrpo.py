"""XRPO's rollout planning: extra samples go to the prompts whose success rate they would pin down best, and a prompt
no sample solved gets solved exemplars in context.

    per prompt q with n_q samples, mean r_q, standard deviation s_q:
        h_q(n)  = t_{1 - alpha/2, n - 1} s_q / sqrt(n)                 confidence-interval half-width
        D_q     = h_q(n_q) - h_q(n_q + 1)                             what one more sample would shave off it
        phi_q   = lambda sqrt(log(1 + T) / n_q)                       exploration bonus, T = samples drawn so far
        Pi_q    = D_q + phi_q                                         priority
    n0 samples per prompt first; the rest of the budget (G per prompt on average) in `rounds` rounds, each sample of
    a round given to the prompt of highest priority at that point (its n_q counting the samples planned before it)
    a prompt whose samples so far all scored 0 draws its extra samples with `n_exemplars` solved examples in the
    prompt (in-context seeding)

A prompt with spread rewards is where another sample changes the estimate most; a prompt with s_q = 0 gets extra
samples only while the exploration bonus is larger than every D_q (catalog test 1). Groups therefore have different
sizes; the batch holds G rows per prompt on average, the same budget as GRPO.

Reference: the official code (UIUC-MLSys/XRPO) was not available; formulas from a review of arXiv 2510.06672 and a
third-party reimplementation (Wodlfvllf/grpo-composer `grpo_composer/data/sampling/xrpo.py` @ 27ced9e, which writes
the bonus as lambda log(1 + T) / n_q, without the square root, and T as training steps): `secondary`. Our choices:
the catalog's square-root bonus with T the samples drawn so far in this step's plan; n_q = 1 has no standard
deviation, so D_q = 0 there (the bonus alone decides); the t quantile is exact for integer degrees of freedom
(`t_quantile`); seeded samples are trained under the seeded prompt they were drawn from; the exemplars are other
examples of the run's task with their solutions (`Task.expert_actions`), in ICPO's "Question / Answer" format.
The advantage half of XRPO is `advantage:xrpo-sharpening` (workbench/advantages/xrpo.py).
"""
from __future__ import annotations

import math
import random

import torch

from workbench import registry
from workbench.advantages.xrpo import XRPO_TITLE
from workbench.batch import concat
from workbench.rollout.icpo import ICL_TEMPLATE, demonstrations
from workbench.rollout.turns import TURNS_PROVIDES, turns
from workbench.tasks.guidance import HintedTask


XRPO_LOGS = {
    "xrpo/extra_share": ("XRPO: share of the step's samples allocated by priority (after the first n0 per prompt).",
                         "1 - n0 / G by construction."),
    "xrpo/group_size_max": ("XRPO: the largest number of samples any prompt received.",
                            "Above G: the plan concentrates samples on uncertain prompts; equal to n0 + (G - n0) x "
                            "prompts: one prompt took everything (lambda too small)."),
    "xrpo/seeded": ("XRPO: samples drawn with solved exemplars in context (prompts with all-zero rewards).",
                    "Falls as fewer prompts are unsolved; 0 with seeding off."),
}


def t_cdf_two_sided(t: float, dof: int) -> float:
    """P(|T| < t) for Student's t with an integer `dof` (Abramowitz & Stegun 26.7.3-26.7.4)."""
    theta = math.atan(t / math.sqrt(dof))
    c2 = math.cos(theta) ** 2
    if dof % 2 == 0:
        term, total = 1.0, 1.0
        for k in range(1, dof // 2):
            term *= c2 * (2 * k - 1) / (2 * k)
            total += term
        return math.sin(theta) * total
    term, total = 1.0, 1.0 if dof > 1 else 0.0
    for k in range(1, (dof - 1) // 2):
        term *= c2 * (2 * k) / (2 * k + 1)
        total += term
    return 2 / math.pi * (theta + (math.sin(theta) * math.cos(theta) * total if dof > 1 else 0.0))


def t_quantile(level: float, dof: int) -> float:
    """t with P(|T| < t) = level (the two-sided critical value t_{1 - alpha/2, dof} at level = 1 - alpha)."""
    lo, hi = 0.0, 1.0
    while t_cdf_two_sided(hi, dof) < level:
        hi *= 2
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_cdf_two_sided(mid, dof) < level else (lo, mid)
    return (lo + hi) / 2


def half_width(std: float, n: int, alpha: float) -> float:
    """h(n) = t_{1 - alpha/2, n - 1} std / sqrt(n); 0 for n < 2 (no spread is known from one sample)."""
    return 0.0 if n < 2 else t_quantile(1 - alpha, n - 1) * std / math.sqrt(n)


def priority(std: float, n: int, total: int, *, alpha: float, lam: float) -> float:
    """Pi = h(n) - h(n + 1) + lambda sqrt(log(1 + T) / n)."""
    return half_width(std, n, alpha) - half_width(std, n + 1, alpha) + lam * math.sqrt(math.log(1 + total) / n)


def allocate(stds: list[float], counts: list[int], budget: int, drawn: int, *, alpha: float, lam: float) -> list[int]:
    """Extra samples per prompt: `budget` samples, each to the prompt of highest priority given the counts so far
    (planned ones included) and T = `drawn` + the samples planned before it; ties to the lower index."""
    counts, extra = list(counts), [0] * len(counts)
    for k in range(budget):
        best = max(range(len(counts)), key=lambda q: (priority(stds[q], counts[q], drawn + k, alpha=alpha, lam=lam),
                                                     -q))
        counts[best] += 1
        extra[best] += 1
    return extra


def check_xrpo(*, initial=2, rounds=2, alpha=0.05, lam=0.1, n_exemplars=1, group_size=None, **_) -> None:
    if initial < 1 or rounds < 1 or n_exemplars < 0:
        raise ValueError(f"initial={initial}, rounds={rounds}, n_exemplars={n_exemplars}: give initial >= 1 samples "
                         "per prompt, rounds >= 1 and n_exemplars >= 0")
    if not 0 < alpha < 1 or lam < 0:
        raise ValueError(f"alpha={alpha}, lam={lam}: the confidence level needs 0 < alpha < 1 and the exploration "
                         "weight lam >= 0")
    if group_size is not None and initial > group_size:
        raise ValueError(f"initial={initial} samples per prompt exceed the budget of group_size={group_size}: set "
                         "initial <= group_size")


@registry.rollout(
    "xrpo", title=XRPO_TITLE,
    summary="n0 samples per prompt, then the rest of the G-per-prompt budget in rounds to the prompts of highest "
            "priority (confidence-interval shrinkage + exploration bonus); all-zero prompts get solved exemplars "
            "in context.",
    equation=r"\Pi_q = h_q(n_q) - h_q(n_q + 1) + \lambda\sqrt{\log(1+T)/n_q},\quad "
             r"h_q(n) = t_{1-\alpha/2,\,n-1}\,s_q/\sqrt{n}",
    reads=(), provides=TURNS_PROVIDES, needs=("solution",), logs=XRPO_LOGS, check=check_xrpo)
def xrpo_rollout(engine, task, examples, *, group_size: int, sampling, ctx=None, initial=2, rounds=2, alpha=0.05,
                 lam=0.1, n_exemplars=1):
    """Rows grouped per example (group ids = example index), G rows per example on average; a row's group size is
    what the plan gave its prompt. Exemplars are drawn with `ctx.rng()`. Greedy rollouts (evaluation) are plain
    `turns`. Logs xrpo/extra_share, xrpo/group_size_max, xrpo/seeded."""
    check_xrpo(initial=initial, rounds=rounds, alpha=alpha, lam=lam, n_exemplars=n_exemplars, group_size=group_size)
    if sampling.greedy:
        return turns(engine, task, examples, group_size=group_size, sampling=sampling)
    rng = ctx.rng() if ctx is not None else random.Random(0)
    parts = [turns(engine, task, examples, group_size=initial, sampling=sampling)]
    left = (group_size - initial) * len(examples)
    seeded = 0
    for r in range(rounds):
        batch = concat(parts, pad_id=engine.tokenizer.pad_token_id)
        rewards = [batch.rewards[batch.group == q] for q in range(len(examples))]
        stds = [float(x.std()) if len(x) > 1 else 0.0 for x in rewards]
        chunk = left // (rounds - r)
        extra = allocate(stds, [len(x) for x in rewards], chunk, batch.size, alpha=alpha, lam=lam)
        left -= chunk
        unsolved = [bool((x == 0).all()) and n_exemplars > 0 for x in rewards]
        for q in (q for q in range(len(examples)) if extra[q]):
            parts.append(more_samples(engine, task, examples[q], q, extra[q], sampling, rng,
                                      n_exemplars if unsolved[q] else 0))
            seeded += extra[q] * unsolved[q]
    batch = concat(parts, pad_id=engine.tokenizer.pad_token_id)
    batch = batch.select(torch.argsort(batch.group, stable=True))
    if ctx is not None:
        sizes = torch.bincount(batch.group)
        ctx.metrics.update({"xrpo/extra_share": 1 - initial * len(examples) / batch.size,
                            "xrpo/group_size_max": float(sizes.max()), "xrpo/seeded": float(seeded)})
    return batch


def more_samples(engine, task, example, q: int, n: int, sampling, rng: random.Random, n_exemplars: int):
    """n more samples of `example` as rows of group q; with n_exemplars solved examples in its prompt when > 0."""
    if n_exemplars:
        exemplars = demonstrations(task, example, n_exemplars, rng)
        task = HintedTask(task, lambda _: exemplars, ICL_TEMPLATE)
    out = turns(engine, task, [example], group_size=n, sampling=sampling)
    out.group = torch.full_like(out.group, q)
    return out
