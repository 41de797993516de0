"""rStar2-Agent's Resample-on-Correct (RoC): oversample each prompt, then down-sample by trace quality.

    (a) drop groups whose rewards are all equal (rStar's `reject_equal_reward`, as dynamic-sampling's test);
    (b) per group of n rollouts kept to N:  negatives R <= 0, positives R > 0,
        k_neg = round(n_neg N / n), k_pos = N - k_neg (= round(n_pos N / n): round half to even),
        raised to min(min_negative, n_neg) / min(min_positive, n_pos) at the expense of the other side;
    (c) positives ranked by p = p_err + p_format, the k_pos lowest kept (ties: rollout order);
        p_err    = (# tool responses with an error) / (# tool responses), 0.5 without tool calls
        p_format = min((# closed <answer> blocks - 1) / # assistant turns, 1), 1 when tags are missing or unbalanced
        negatives: the k_neg lowest p as well (the code), or the first k_neg in rollout order ("order").

Reference: microsoft/rStar @ ecbfb94, `rstar2_agent/down_sample/roc.py` (`resample_of_correct`,
`calc_error_ratio_penalty_weights`, `calc_format_penalty_weights`), `reject_sampling.py` (`reject_equal_reward`),
`rstar2_agent_ray_trainer.py` (`_down_sample_batch`), `examples/run_qwen3-14b_rstar2_agent_weave.sh` (n = 32,
down_sample_to_n = 16, both minimums 2, both penalties on). Our code, written from that reading.
"""
from __future__ import annotations

import re
from dataclasses import replace

import torch

from workbench import registry
from workbench.advantages.group import group_index
from workbench.batch import RolloutBatch, concat
from workbench.advantages.base import check_rewards
from workbench.advantages.baselines import degenerate_groups

ROC_TITLE = "rStar2-Agent: Agentic Reasoning Technical Report"
NEGATIVES = ("penalty", "order")  # how negatives are down-sampled: by penalty (the code), in rollout order
NO_TOOL_CALLS = 0.5               # p_err of a trace without tool responses (the reference's)

ROC_LOGS = {
    "roc/equal_reward_groups": ("RoC: share of the step's groups dropped because all their rewards were equal.",
                                "Below 1. At 1: every prompt is solved, or failed, by all its samples (the "
                                "batch is then down-sampled as it is, all A = 0)."),
    "roc/tool_error_ratio": ("RoC: share of all sampled tool responses (before down-sampling) that report an "
                             "error (the reference's global_err_ratio).",
                             "Falling over training; 0 on tasks without tool calls."),
    "roc/kept_positive_penalty": ("RoC: mean penalty p_err + p_format of the positive traces kept.",
                                  "Below roc/dropped_positive_penalty: RoC keeps the cleaner correct traces."),
    "roc/dropped_positive_penalty": ("RoC: mean penalty p_err + p_format of the positive traces dropped (0 when "
                                     "none was dropped).",
                                     "At or above roc/kept_positive_penalty; equal: the penalties do not "
                                     "separate the correct traces (e.g. a task without tools or answer tags)."),
}


def error_penalty(responses: int, errors: int) -> float:
    """p_err of one trace: errors / tool responses, 0.5 when it made no tool call (`NO_TOOL_CALLS`)."""
    return NO_TOOL_CALLS if responses == 0 else errors / responses


def format_penalty(text: str, turns: int) -> float:
    """p_format of one trace: min((closed <answer>...</answer> blocks - 1) / assistant turns, 1); 1 when either tag
    is missing, when the tags do not pair into closed blocks, or when there is no assistant turn."""
    if "<answer>" not in text or "</answer>" not in text or turns <= 0:
        return 1.0
    closed = len(re.findall(r"<answer>.*?</answer>", text, re.DOTALL))
    if text.count("<answer>") != closed or text.count("</answer>") != closed:
        return 1.0
    return min((closed - 1) / turns, 1.0)


def tool_calls(batch: RolloutBatch) -> tuple[list[int], list[int]]:
    """(tool responses, of which errors) per row. A tool response is a step answered by the environment: a step id
    with observation tokens (`turn` >= 0, `mask` = 0); it is an error when that step's `turn_info` entry has a
    `tool_error`. A batch without `turn` (a one-turn rollout) has none."""
    if batch.turn is None:
        return [0] * batch.size, [0] * batch.size
    answered = (batch.turn >= 0) & (batch.mask == 0)
    responses, errors = [], []
    for i in range(batch.size):
        steps = sorted(set(batch.turn[i][answered[i]].tolist()))
        info = batch.turn_info[i] if batch.turn_info else []
        responses.append(len(steps))
        errors.append(sum(1 for s in steps if s < len(info) and info[s].get("tool_error")))
    return responses, errors


def assistant_turns(batch: RolloutBatch) -> list[int]:
    """Assistant turns per row: its steps (`turn_info` entries), 1 for a one-turn rollout."""
    if batch.turn_info:
        return [len(steps) for steps in batch.turn_info]
    return [1] * batch.size


def penalties(batch: RolloutBatch, *, error_ratio_on=True, answer_format_on=True) -> tuple[torch.Tensor, dict]:
    """([B] p = p_err + p_format (each term only when switched on), {responses, errors} summed over the rows)."""
    responses, errors = tool_calls(batch)
    p = torch.zeros(batch.size, dtype=torch.float64)
    if error_ratio_on:
        p += torch.tensor([error_penalty(r, e) for r, e in zip(responses, errors)], dtype=torch.float64)
    if answer_format_on:
        texts = batch.completions if batch.completions else [""] * batch.size
        p += torch.tensor([format_penalty(t, n) for t, n in zip(texts, assistant_turns(batch))],
                          dtype=torch.float64)
    return p, {"responses": sum(responses), "errors": sum(errors)}


def quotas(n_neg: int, n_pos: int, keep: int, min_negative: int, min_positive: int) -> tuple[int, int]:
    """(k_neg, k_pos), k_neg + k_pos = keep, of a group of n_neg + n_pos > keep traces (the reference's
    arithmetic: round half to even keeps round(n_neg keep / n) + round(n_pos keep / n) = keep)."""
    n = n_neg + n_pos
    k_neg = round(n_neg * keep / n)
    k_pos = keep - k_neg
    if k_neg <= min(min_negative, n_neg):
        k_neg = min(min_negative, n_neg)
        k_pos = keep - k_neg
    if k_pos <= min(min_positive, n_pos):
        k_pos = min(min_positive, n_pos)
        k_neg = keep - k_pos
    return k_neg, k_pos


def down_sample_group(rewards: torch.Tensor, penalty: torch.Tensor, keep: int, *, min_negative=2, min_positive=2,
                      negatives="penalty") -> list[int]:
    """Indices (ascending: rollout order) of the `keep` traces RoC keeps of one group (rewards, penalties [n]): all
    of them when n == keep, none when n < keep (the reference skips such a group)."""
    n = rewards.shape[0]
    if n <= keep:
        return list(range(n)) if n == keep else []
    pos = [i for i in range(n) if rewards[i] > 0]
    neg = [i for i in range(n) if not rewards[i] > 0]
    k_neg, k_pos = quotas(len(neg), len(pos), keep, min_negative, min_positive)
    by_penalty = lambda rows: sorted(rows, key=lambda i: float(penalty[i]))  # noqa: E731  (stable: ties in order)
    chosen = by_penalty(pos)[:k_pos] + (by_penalty(neg) if negatives == "penalty" else neg)[:k_neg]
    if len(chosen) != keep:
        raise ValueError(f"grpo-roc: kept {len(chosen)} traces of a group of {n}, not {keep} ({len(neg)} negative, "
                         f"{len(pos)} positive; minimums {min_negative}/{min_positive})")
    return sorted(chosen)


def roc_kept(rewards: torch.Tensor, group: torch.Tensor, penalty: torch.Tensor, keep: int, *, min_negative=2,
             min_positive=2, negatives="penalty") -> tuple[list[int], torch.Tensor]:
    """(rows RoC keeps, [B] bool: the row's group has rewards that differ) of a batch of n traces per group: groups
    of equal rewards dropped (rStar's reject_equal_reward; all kept as they are when every group is equal), then
    `keep` per group by `down_sample_group`."""
    informative = ~degenerate_groups(rewards.double(), group)
    rows_in = torch.nonzero(informative if bool(informative.any()) else torch.ones_like(informative)).flatten()
    dense, sizes = group_index(group[rows_in])
    kept = []
    for g in range(sizes.shape[0]):
        rows = rows_in[dense == g]
        chosen = down_sample_group(rewards[rows], penalty[rows], keep, min_negative=min_negative,
                                   min_positive=min_positive, negatives=negatives)
        kept += rows[chosen].tolist()
    return kept, informative


def check_roc(*, oversample=2, min_negative=2, min_positive=2, error_ratio=True, answer_format=True,
              negatives="penalty", group_size=None, **_) -> None:
    """Settings RoC cannot take, refused with the fix; `group_size` (the run's G, the kept traces per prompt) when
    the pipeline knows it."""
    if not (isinstance(oversample, int) and not isinstance(oversample, bool) and oversample >= 1):
        raise ValueError(f"oversample must be a whole number >= 1 (rollouts sampled per kept trace; 1: no extra "
                         f"rollouts, only equal-reward groups dropped), got {oversample!r}")
    for name, value in (("min_negative", min_negative), ("min_positive", min_positive)):
        if not (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
            raise ValueError(f"{name} must be a whole number >= 0 (traces of that sign kept when available), got "
                             f"{value!r}")
    if negatives not in NEGATIVES:
        raise ValueError(f"negatives must be one of {list(NEGATIVES)}, got {negatives!r}")
    if group_size is not None and min_negative + min_positive > group_size:
        raise ValueError(f"min_negative + min_positive = {min_negative + min_positive} traces cannot be kept in a "
                         f"group of group_size={group_size} (the reference asserts min sum <= down_sample_to_n): "
                         f"lower the minimums or raise group_size")


def oversampled(batch: RolloutBatch, ctx, extra_per_prompt: int) -> RolloutBatch:
    """`batch` with `extra_per_prompt` more rollouts of each of its prompts (`ctx.rollout`, rewarded as the batch's
    own), each group's rows together: the batch's rows first, then the new ones, in rollout order."""
    ids = torch.unique(batch.group)
    extra = ctx.rollout([ctx.examples[int(g)] for g in ids], group_size=extra_per_prompt, rewarded=True)
    extra = replace(extra, group=ids[extra.group])  # back to the batch's group ids
    merged = concat([batch, extra], pad_id=ctx.pad_id)
    return merged.select(torch.sort(merged.group, stable=True).indices)


@registry.group_transform(
    "grpo-roc", title=ROC_TITLE,
    summary="Resample-on-Correct: sample oversample x G rollouts per prompt, drop all-equal groups, keep G per "
            "prompt with the negative/positive ratio preserved (at least 2 of each): the positives of lowest tool-"
            "error + answer-format penalty, the negatives by the same penalty. At our scale: G is the kept group "
            "(the script's 16 of 32 is --set group_size=16 with oversample 2); p_err counts the environment's "
            "tool_error per answered step; p_format reads <answer> tags in the transcript (1 on tasks without "
            "them, so only p_err ranks there).",
    equation=r"k_\pm = \mathrm{round}\big(n_\pm\,G / n\big)\ (\ge 2);\quad \text{keep the } k_+ \text{ correct traces "
             r"of lowest } p = \tfrac{\#\text{err}}{\#\text{tool}} + \min\!\big(\tfrac{\#\text{answer} - 1}"
             r"{\#\text{turns}}, 1\big)",
    reads=("rewards", "group", "mask", "completions", "turn", "turn_info"), logs=ROC_LOGS, check=check_roc,
    choices={"negatives": NEGATIVES})
def grpo_roc(batch, ctx, *, oversample=2, min_negative=2, min_positive=2, error_ratio=True, answer_format=True,
             negatives="penalty"):
    """Reads `rewards` (R > 0 is a positive, the reference's summed token_level_scores), `group`, `mask`, `turn`
    and `turn_info` (tool responses and their `tool_error`), `completions` (the answer tags). Samples
    (oversample - 1) x G more rollouts of the step's prompts (`ctx.rollout(..., rewarded=True)`), so each group
    holds n = oversample x G traces, and returns G = `ctx.group_size` per surviving group (the reference's
    down_sample_to_n), in rollout order.

    oversample: n / G (the script's 32 / 16 = 2); min_negative / min_positive: the reference's
    min_zero_reward_trace_num / min_non_zero_reward_trace_num (2); error_ratio / answer_format: roc_error_ratio /
    roc_answer_format (both on); negatives: "penalty" ranks the negatives by the same penalty, as the reference's
    code does (stable sort), "order" keeps the first k_neg in rollout order (the paper's uniform down-sampling of
    negatives). The paper's optional mode, positives drawn with probability inversely related to the penalty, is
    not implemented.
    At our scale: the tool responses are the steps the environment answered (observation tokens), an error where
    the environment set `tool_error` (the reference greps "error" in each <tool_response>); the assistant turns are
    the row's steps. When every group has equal rewards (the reference skips the step) the groups are down-sampled
    as they are and train with A = 0, as dynamic-sampling trains on its first round.
    Logs roc/equal_reward_groups, roc/tool_error_ratio, roc/kept_positive_penalty, roc/dropped_positive_penalty."""
    check_roc(oversample=oversample, min_negative=min_negative, min_positive=min_positive, negatives=negatives)
    check_roc(min_negative=min_negative, min_positive=min_positive, group_size=ctx.group_size)
    keep = ctx.group_size
    batch.require("rewards")
    if oversample > 1:
        batch = oversampled(batch, ctx, (oversample - 1) * keep)
    check_rewards(batch.rewards)
    penalty, counts = penalties(batch, error_ratio_on=error_ratio, answer_format_on=answer_format)
    kept, informative = roc_kept(batch.rewards, batch.group, penalty, keep, min_negative=min_negative,
                                 min_positive=min_positive, negatives=negatives)
    kept_mask = torch.zeros(batch.size, dtype=torch.bool)
    kept_mask[kept] = True
    positive = (batch.rewards > 0) & informative
    n_groups = int(torch.unique(batch.group).numel())
    mean = lambda x: float(x.mean()) if x.numel() else 0.0  # noqa: E731
    ctx.metrics.update({
        "roc/equal_reward_groups": (n_groups - int(torch.unique(batch.group[informative]).numel())) / n_groups,
        "roc/tool_error_ratio": counts["errors"] / counts["responses"] if counts["responses"] else 0.0,
        "roc/kept_positive_penalty": mean(penalty[positive & kept_mask]),
        "roc/dropped_positive_penalty": mean(penalty[positive & ~kept_mask])})
    out = batch.select(torch.tensor(sorted(kept), dtype=torch.long))
    return out if out.size else batch
