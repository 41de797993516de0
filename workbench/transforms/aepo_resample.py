"""AEPO-arbitrary's re-sampling: correct samples drawn at the target temperature replace the first rows of the batch.

    T = T_high if H <= H_target else T_low                      (the aepo-arbitrary controller)
    re-sample the first quarter of the step's prompts at T, G samples each;
    keep those with GRPO advantage > 0.05 (correct, in a group that is not all correct), in row order;
    n = min(N, #kept), halved when H > H_target; they replace the batch's first n rows and train with A = 1

so that grad J = grad J_GRPO + alpha E_{o ~ pi^T}[grad log pi(o | q) R(q, o)] with R = 1 on the kept samples
(positive-only REINFORCE); alpha is the share of replaced rows. The advantage override is `advantage:aepo-arbitrary`
after `grpo` in the chain (workbench/advantages/aepo.py); it reads `batch.resampled`.

Reference: 597358816/AEPO `verl/trainer/ray_trainer.py`, branch `alg == "AEPO"` (L784-812), transcribed in
tests/anchors/formulas_dcpo.py.
"""
from __future__ import annotations

import math

import torch

from workbench import registry
from workbench.advantages.aepo import AEPO_TITLE
from workbench.advantages.group import grpo
from workbench.batch import concat

REFERENCE_N = 60 / (512 * 5)  # reinforce_sample_num = 60 of rollout_batch_size 512 prompts x n = 5 samples


def replaced_count(n_max: int, n_candidates: int, entropy_gap: float) -> int:
    """min(N, #candidates), halved (floor) when the entropy is above the target (gap < 0), as the reference."""
    n = min(n_max, n_candidates)
    return n // 2 if entropy_gap < 0 else n


def check_fractions(**fractions: float) -> None:
    for name, value in fractions.items():
        if not 0 <= value <= 1:
            raise ValueError(f"{name} must be a fraction in [0, 1], got {value}")


def positive_samples(resampled, threshold: float) -> torch.Tensor:
    """Row ids (in order) of the re-sampled rows whose GRPO advantage exceeds `threshold` (the reference's
    `_select_by_advantage(..., threshold=0.05, absolute=False)` on the first token's advantage)."""
    advantage = grpo(resampled)[:, 0]  # [B'] GRPO over the re-sampled groups, verl-EasyR1's (Bessel std, eps 1e-6)
    return torch.nonzero(advantage > threshold).flatten()


AEPO_LOGS = {
    "aepo/candidates": ("AEPO: re-sampled samples whose GRPO advantage is above 0.05 (correct, in a group not all "
                        "correct).",
                        "Above 0 on most steps. Always 0: no re-sampled prompt had a correct sample among wrong "
                        "ones, so nothing steers the entropy."),
    "aepo/replaced": ("AEPO: rows of the batch replaced by those samples, trained with advantage exactly 1.",
                      "min(ceil(3/128 B), aepo/candidates), halved above the target: up to 3 of the smoke run's 128 "
                      "rows, 1 of 16 on test runs. 0 for long stretches: no control."),
}


@registry.group_transform(
    "aepo-arbitrary", title=AEPO_TITLE,
    summary="Re-sample a quarter of the prompts at the controller's temperature; the correct samples (GRPO "
            "advantage > 0.05) replace up to N of the batch's first rows (N/2 above the entropy target) and are "
            "marked in batch.resampled for an advantage of exactly 1.",
    equation=r"\nabla J = \nabla J_{GRPO} + \alpha\,\mathbb{E}_{q,\,o\sim\pi_\theta^{T}}"
             r"\big[\nabla\log\pi_\theta(o\mid q)\,R(q,o)\big]",
    reads=("rewards", "group"), provides=("resampled",), logs=AEPO_LOGS)
def aepo_resample(batch, ctx, *, temperature=1.0, entropy_gap=0.0, resample_frac=0.25, replace_frac=REFERENCE_N,
                  threshold=0.05):
    """Reads `group` and the step's examples (`ctx.examples`); re-samples with `ctx.rollout(..., temperature=T)`.

    temperature, entropy_gap: driven by the aepo-arbitrary controller (undriven: T = 1, full N).
    resample_frac = 1/4: the first floor(n_prompts / 4) of the step's examples are re-sampled, G samples each
    (the reference's `gen_batch[:len // 4]` with `n = rollout.n`).
    replace_frac: N as a share of the batch's rows, N = ceil(replace_frac B). Our reading: the reference's fixed
    `reinforce_sample_num` = 60 is 60 / (512 prompts x 5 samples) = 3/128 of its batch; ceil keeps one row on a small
    batch while the fraction is positive. replace_frac = 0 or resample_frac = 0 (alpha = 0) leaves the batch as it
    is, without sampling.
    threshold = 0.05: the reference's advantage threshold for "correct".

    The re-sampled rows carry the environment's rewards (`ctx.rollout`; this transform's recipe has no reward
    functions) and their prompt's group id shifted past the batch's ids. Our reading: the kept rows' GRPO
    baselines are over the rows that remain in their group, whereas the reference computed them before the
    replacement over the full group. Only the group that the replaced prefix cuts differs; when one row of it is
    left, its group of one gets A = 0 (the recipe's grpo takes allow_singletons=True). The re-sampled rows keep their
    rollout `mu_logp` (at T): don't combine with rollout importance correction, which would undo the temperature.
    Place this transform first among group transforms (it concatenates with the rollout's fields only).
    Reference bug not reproduced: when no re-sampled sample is correct the reference crashes (`None.batch`);
    here nothing is replaced.
    Logs `aepo/candidates` (re-sampled rows above the threshold) and `aepo/replaced` (rows replaced).
    """
    if not (math.isfinite(temperature) and temperature > 0):
        raise ValueError(f"temperature must be finite and > 0, got {temperature}")
    check_fractions(resample_frac=resample_frac, replace_frac=replace_frac)
    n_prompts = int(len(ctx.examples) * resample_frac)
    n_max = math.ceil(replace_frac * batch.size - 1e-9)
    ctx.metrics.update({"aepo/candidates": 0.0, "aepo/replaced": 0.0})
    if n_prompts == 0 or n_max == 0:
        return _marked(batch, 0)
    resampled = ctx.rollout(ctx.examples[:n_prompts], group_size=ctx.group_size, temperature=temperature)
    resampled.scores = resampled.rewards.clone()  # what Pipeline.reward does without reward functions
    candidates = positive_samples(resampled, threshold)
    n = replaced_count(n_max, len(candidates), entropy_gap)
    ctx.metrics.update({"aepo/candidates": float(len(candidates)), "aepo/replaced": float(n)})
    if n == 0:
        return _marked(batch, 0)
    chosen = resampled.select(candidates[:n])
    chosen.group = chosen.group + int(batch.group.max()) + 1  # own groups: outside the kept rows' baselines
    kept = batch.select(torch.arange(n, batch.size))
    return _marked(concat([chosen, kept], pad_id=ctx.pad_id), n)  # the reference: concat([controller[:n], batch[n:]])


def _marked(batch, n: int):
    """`batch` with `resampled` [B] True on its first n rows."""
    batch.resampled = torch.arange(batch.size) < n
    return batch
