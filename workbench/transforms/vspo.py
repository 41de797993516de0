"""VSPO's value-based sampling: zero-variance groups are replaced by the candidate prompts of highest task value.

    p(x)  <- decay p(x) + (1 - decay) p_hat(x)      smoothed pass rate per prompt (first sighting: p_hat)
    v(x)  =  p(x) (1 - p(x))                        task value: largest for prompts solved half the time
    step: round 0 as sampled; if k of its groups have zero reward variance, resample rounds 1.. until
          oversample * k informative candidate groups exist (or max_rounds); the k zero-variance groups are
          replaced by the k candidates of highest v (ties: first sampled). Every row gets task_value = v(x).

The pass rates live in the pipeline state (`PassRates`, checkpointed); `task_value` feeds VSPO's value-smoothing
clip (`workbench/objectives/vspo.py`).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

from workbench import registry
from workbench.advantages.baselines import degenerate_groups
from workbench.advantages.group import group_index, group_pass_rates
from workbench.batch import RolloutBatch, concat
from workbench.objectives.vspo import VSPO_TITLE, task_value
from workbench.rollout.fill_groups import keep_informative_groups
from workbench.transforms.dynamic_sampling import SAMPLING_LOGS


@dataclass
class PassRates:
    """Smoothed pass rate per prompt text and the step each prompt was last seen (for eviction)."""

    rate: dict = field(default_factory=dict)   # prompt -> smoothed pass rate in [0, 1]
    seen: dict = field(default_factory=dict)   # prompt -> last step it was sampled

    def observe(self, prompt: str, p_hat: float, step: int, decay: float) -> None:
        old = self.rate.get(prompt)
        self.rate[prompt] = p_hat if old is None else decay * old + (1 - decay) * p_hat
        self.seen[prompt] = step

    def value(self, prompt: str) -> float:
        return task_value(self.rate[prompt])

    def evict(self, max_prompts: int) -> None:
        """Forget the least recently seen prompts beyond `max_prompts` (ties: first inserted)."""
        excess = len(self.rate) - max_prompts
        for prompt in sorted(self.seen, key=self.seen.get)[:max(excess, 0)]:
            del self.rate[prompt], self.seen[prompt]


def observe(state: PassRates, batch: RolloutBatch, step: int, decay: float, gather=list) -> None:
    """Update the pass rates with every group of `batch` and, under data parallelism, of every rank's batch
    (`gather`: `ctx.gather_objects`), in rank order, so the state is the same on every rank."""
    p_hat, prompts = group_pass_rates(batch)
    for prompt, p in gather(list(zip(prompts, p_hat.tolist()))):
        state.observe(prompt, p, step, decay)


def total(ctx, n: float) -> float:
    """`n` summed over the data-parallel ranks (itself in one process)."""
    return float(ctx.gather(torch.tensor([float(n)])).sum())


def split_groups(batch: RolloutBatch) -> list[RolloutBatch]:
    """One batch per group, in dense-group order."""
    dense, counts = group_index(batch.group)
    return [batch.select(torch.nonzero(dense == g).flatten()) for g in range(counts.shape[0])]


def renumbered(parts: list[RolloutBatch], pad_id: int) -> RolloutBatch:
    """Concatenate groups (each part: one or more groups) with dense ids 0.. in order."""
    out, offset = [], 0
    for part in parts:
        dense, counts = group_index(part.group)
        out.append(replace(part, group=dense + offset))
        offset += counts.shape[0]
    return concat(out, pad_id=pad_id)


def check_params(max_rounds, oversample, decay, max_prompts) -> None:
    if not (isinstance(max_rounds, int) and max_rounds >= 1):
        raise ValueError(f"max_rounds must be an int >= 1 (1: no resampling), got {max_rounds!r}")
    if not oversample >= 1:
        raise ValueError(f"oversample must be >= 1 (candidates per replaced group), got {oversample}")
    if not 0 <= decay < 1:
        raise ValueError(f"decay must be in [0, 1) (weight of the previous pass rate), got {decay}")
    if not (isinstance(max_prompts, int) and max_prompts >= 1):
        raise ValueError(f"max_prompts must be an int >= 1, got {max_prompts!r}")


def draw_candidates(ctx, state: PassRates, need: int, *, max_rounds, oversample, decay):
    """(informative candidate groups in sampling order, rounds used): rounds 1.. until oversample * need. Under
    data parallelism every rank samples the same number of rounds (the counts are summed over the ranks), so the
    pass rates they gather stay the same on all of them."""
    candidates, rounds = [], 1
    while total(ctx, need) and rounds < max_rounds and total(ctx, len(candidates)) < oversample * total(ctx, need):
        extra = ctx.resample(rounds)
        rounds += 1
        observe(state, extra, ctx.step, decay, ctx.gather_objects)
        informative = keep_informative_groups(extra)
        if informative.size:
            candidates += split_groups(informative)
    return candidates, rounds


VSPO_LOGS = {
    "vspo/zero_var_groups": ("VSPO: groups of the step's first sampling round whose rewards were all equal.",
                             "Below prompts_per_step (as a share of it, what frac_zero_std_groups is for plain "
                             "GRPO). Equal to prompts_per_step: every prompt is solved, or failed, by all of its "
                             "samples."),
    "vspo/replaced_groups": ("VSPO: zero-variance groups replaced by resampled prompts of highest task value.",
                             "Equal to vspo/zero_var_groups when the extra rounds found enough informative prompts; "
                             "well below it: few prompts still split their samples (raise max_rounds or G)."),
    "vspo/task_value_mean": ("VSPO: mean task value p(1 - p) (smoothed pass rate p of the row's prompt) of the "
                             "trained rows; 0.25 at most.",
                             "Around 0.1 to 0.25 (p between about 0.15 and 0.85). Falling towards 0: the trained "
                             "prompts are nearly always or never solved."),
}


@registry.group_transform(
    "vspo", title=VSPO_TITLE,
    summary="Replace zero-variance groups by resampled prompts of highest task value v = p(1 - p) (smoothed pass "
            "rates kept across steps); every row gets its prompt's task_value for the value-smoothing clip.",
    equation=r"v(x) = \bar p(x)\,(1 - \bar p(x)),\quad \bar p(x) \leftarrow d\,\bar p(x) + (1-d)\,\hat p(x);\ "
             r"\text{zero-variance groups} \to \mathrm{top}_k\,v \text{ among resampled informative groups}",
    reads=("rewards", "scores", "group", "prompts"), provides=("task_value",), state=PassRates,
    logs={"sampling/rounds": SAMPLING_LOGS["sampling/rounds"], **VSPO_LOGS})
def vspo_resample(batch, ctx, *, max_rounds=3, oversample=2.0, decay=0.5, max_prompts=4096):
    r"""VSPO's sampling half (arXiv 2512.07478). No reference implementation located; the abstract says VSPO
    "replaces low-value samples with prompts selected by a task-value metric balancing difficulty and
    uncertainty" (v2: "replaces zero advantages samples"). The metric's form could not be read here
    (`abstract-only`).

    Our reading: task value v(x) = p(x)(1 - p(x)) of a smoothed pass rate p(x) (largest at p = 1/2: neither too
    easy nor too hard, and the most uncertain outcome); p(x) is an exponential average over the steps a prompt
    was sampled (decay 0.5: the latest step weighs half), starting at its first group's pass rate, the mean
    verifier score clamped to [0, 1]. Only groups with zero reward variance (A = 0 for every group baseline) are
    replaced; candidates are the informative groups of extra sampling rounds (`ctx.resample`, the same sampler
    and rollout as round 0), drawn until `oversample` = 2 candidates per replaced group exist or `max_rounds` = 3
    rounds were sampled (DAPO's dynamic-sampling budget), so the value ranking has a choice. Groups that find no
    replacement stay in the batch (A = 0). `max_rounds` = 1 turns resampling off (the batch is unchanged).
    State: `PassRates` in the pipeline state, updated from every sampled group (round 0 and candidates), at most
    `max_prompts` = 4096 prompts kept (least recently seen dropped; a memory bound of ours, not the paper's).
    Under data parallelism every rank adds every rank's groups (`ctx.gather_objects`) and all ranks sample the same
    number of rounds, so the pass rates are the same on every rank.
    Metrics: `sampling/rounds`, `vspo/zero_var_groups` (round 0), `vspo/replaced_groups`, `vspo/task_value_mean`
    (mean v over the returned rows).
    """
    check_params(max_rounds, oversample, decay, max_prompts)
    state = ctx.state
    observe(state, batch, ctx.step, decay, ctx.gather_objects)
    groups = split_groups(batch)
    zero = [bool(degenerate_groups(g.rewards.double(), g.group)[0]) for g in groups]
    candidates, rounds = draw_candidates(ctx, state, sum(zero), max_rounds=max_rounds, oversample=oversample,
                                         decay=decay)
    ranked = sorted(range(len(candidates)), key=lambda j: -state.value(candidates[j].prompts[0]))  # stable
    chosen = [candidates[j] for j in ranked[:sum(zero)]]
    replace_at = [g for g, z in enumerate(zero) if z][:len(chosen)]
    parts = [g for i, g in enumerate(groups) if i not in replace_at] + chosen
    out = batch if not chosen else renumbered(parts, ctx.pad_id)
    values = torch.tensor([state.value(p) for p in out.prompts], dtype=torch.float64)
    state.evict(max_prompts)
    ctx.metrics.update({"sampling/rounds": rounds, "vspo/zero_var_groups": float(sum(zero)),
                        "vspo/replaced_groups": float(len(chosen)),
                        "vspo/task_value_mean": float(values.mean()) if len(values) else 0.0})
    return replace(out, task_value=values)
