"""DAPO's dynamic sampling as a group transform: drop zero-variance groups and resample until the step is full."""
from __future__ import annotations

from workbench import registry
from workbench.rollout.fill_groups import check_rounds, fill_groups


SAMPLING_LOGS = {
    "sampling/rounds": ("Dynamic sampling (DAPO): generation rounds needed to collect informative groups.",
                        "1 or 2. Always at the maximum: few prompts still give any reward spread."),
    "sampling/shortfall_groups": ("Dynamic sampling: informative groups still missing after the last round.",
                                  "0: every step found enough informative groups."),
}


@registry.group_transform(
    "dynamic-sampling", title="DAPO: An Open-Source LLM Reinforcement Learning System at Scale",
    summary="Drop groups whose rewards are all equal (zero advantage) and refill the batch by resampling.",
    equation=r"\text{keep } g \iff \mathrm{std}_g R > 0 \quad (0 < \mathrm{mean}_g\,\mathrm{acc} < 1)",
    reads=("rewards", "group"), logs=SAMPLING_LOGS, check=check_rounds)
def dynamic_sampling(batch, ctx, *, max_rounds=3):
    """The step's first round is `batch`; rounds 1.. come from `ctx.resample(round)` (new prompts, same step).
    Keeps `ctx.prompts_per_step` informative groups (`fill_groups`, verl `filter_groups`); when no round had
    any, trains on the first round as it is (all A = 0, logged as such). Logs sampling/rounds and
    sampling/shortfall_groups."""
    out, info = fill_groups(lambda r: batch if r == 0 else ctx.resample(r), ctx.prompts_per_step,
                            max_rounds=max_rounds, pad_id=ctx.pad_id)
    ctx.metrics.update({"sampling/rounds": info["rounds"], "sampling/shortfall_groups": info["shortfall"]})
    return out if out.size else batch
