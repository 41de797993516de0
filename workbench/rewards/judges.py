"""CGPO: a mixture of judges flags constraint violations; the constrained optimizers learn from feasible samples.

    CRPG (calibrated-reward policy gradient), a reward transform:
        r'_i = sigma(r_i - b)   if no judge flags sample i,   -1 otherwise;   b = mean of its group's r (or given)
    CRRAFT: supervised fine-tuning on the top-k feasible samples of each prompt (`crraft_select`)
    CODPO:  DPO on pairs (chosen = the best feasible sample, rejected = a violating one) (`codpo_pairs`)

A judge maps the batch's samples to violation flags. Toy stand-ins for the paper's rule-based and LLM judges:
`format_judge` (an empty or truncated response), `length_judge` (an action longer than a token budget),
`copy_judge` (the response copies the prompt: the toy's reward hack of restating the question); any callable with
the `Judge` signature (e.g. a model judge prompting an LLM) joins them.

Our reading (the paper is abstract-only, no public code; the catalog's decision): CRPG as the reward transform
above, with the group's mean raw reward as the baseline r(x, y-bar) (or a fixed `baseline`); violating samples get
-1, below any calibrated reward in (0, 1), so a GRPO advantage never rewards them. CRRAFT and CODPO are optimizers
of their own: the functions here select their training data (use `sft` / `dpo` on it); no new trainer is built,
and the paper's per-task stratification (one judge mixture and optimizer per task, gradients blended) is left out.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Protocol

import torch

from workbench import registry
from workbench.advantages.group import group_stats

KEY = "cgpo"


class Judge(Protocol):
    """Violation flags [B] bool of a batch: `judge(batch, ctx) -> Tensor`; ctx gives the examples (ctx.examples,
    indexed by batch.group) and the run's max_new_tokens. A model judge prompts an LLM per (prompt, response)."""

    def __call__(self, batch, ctx) -> torch.Tensor: ...


def format_judge(batch, ctx) -> torch.Tensor:
    """Flags a response that is empty or was cut at the token budget (no EOS)."""
    empty = batch.mask.sum(-1) == 0
    truncated = batch.truncated.bool() if batch.truncated is not None else torch.zeros_like(empty)
    return empty | truncated


def longest_action(batch) -> torch.Tensor:
    """[B] policy tokens of each row's longest action (turn); the whole response without turn ids."""
    if batch.turn is None:
        return batch.mask.sum(-1)
    turn = batch.turn.long().clamp(min=0)                                   # padding (-1) has mask 0
    per_turn = torch.zeros(batch.size, int(turn.max()) + 1, dtype=batch.mask.dtype)
    return per_turn.scatter_add_(1, turn, batch.mask).amax(-1)


def length_judge(batch, ctx, *, max_fraction=0.75) -> torch.Tensor:
    """Flags a response whose longest action has more policy tokens than max_fraction x the run's max_new_tokens
    (the per-turn budget; padding a response to look thorough is a classic reward-model hack)."""
    return longest_action(batch) > max_fraction * ctx.max_new_tokens


def copy_judge(batch, ctx, *, min_chars=3) -> torch.Tensor:
    """Flags a response that contains its prompt (at least `min_chars` long) verbatim."""
    flags = [len(p.strip()) >= min_chars and p.strip() in c for p, c in zip(batch.prompts, batch.completions)]
    return torch.tensor(flags, dtype=torch.bool) if flags else torch.zeros(batch.size, dtype=torch.bool)


JUDGES: dict[str, Callable] = {"format": format_judge, "length": length_judge, "copy": copy_judge}


def judge_fn(judge) -> Callable:
    """The judge a name of JUDGES or a callable stands for."""
    fn = JUDGES.get(judge) if isinstance(judge, str) else judge
    if fn is None or not callable(fn):
        raise ValueError(f"{KEY}: judges are names from {sorted(JUDGES)} or callables judge(batch, ctx) -> "
                         f"[B] bool; got {judge!r}")
    return fn


def check_cgpo(*, judges=("format", "length", "copy"), max_length_fraction=0.75, **_) -> None:
    if not max_length_fraction > 0:
        raise ValueError(f"{KEY}: max_length_fraction must be > 0, got {max_length_fraction}")
    for judge in judges:
        judge_fn(judge)


def violations(batch, ctx, judges, options: dict | None = None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """([B] bool: some judge flags the sample, {judge name: its [B] flags}); a judge is a name of JUDGES (called
    with options[name] as keywords) or a callable (named by its __name__)."""
    flags = {}
    for judge in judges:
        fn = judge_fn(judge)
        name = judge if isinstance(judge, str) else getattr(fn, "__name__", repr(fn))
        out = torch.as_tensor(fn(batch, ctx, **(options or {}).get(name, {}))).bool().flatten()
        if out.shape != (batch.size,):
            raise ValueError(f"{KEY}: judge {name!r} returned {tuple(out.shape)} flags for {batch.size} samples")
        flags[name] = out
    flagged = torch.zeros(batch.size, dtype=torch.bool)
    for out in flags.values():
        flagged |= out
    return flagged, flags


def calibrated_rewards(rewards: torch.Tensor, group: torch.Tensor, flagged: torch.Tensor, *,
                       baseline=None) -> torch.Tensor:
    """CRPG's r' [B]: sigma(r - b) for feasible samples, -1 for flagged ones; b = the group mean of r (every
    sample's, flagged or not: the baseline response's reward) or the float `baseline`."""
    b = group_stats(rewards, group)[0] if baseline is None else torch.full_like(rewards, float(baseline))
    return torch.where(flagged, -torch.ones_like(rewards), torch.sigmoid(rewards - b))


def best_rows(rows: list[int], rewards: torch.Tensor, k: int) -> list[int]:
    """The k rows of `rows` with the highest rewards (ties: lower row first)."""
    return sorted(rows, key=lambda i: (-float(rewards[i]), i))[:k]


def crraft_select(rewards: torch.Tensor, group: torch.Tensor, flagged: torch.Tensor, *, k=1) -> list[int]:
    """CRRAFT's fine-tuning set: the rows of the k highest-reward feasible samples of each prompt; a prompt with no
    feasible sample contributes none."""
    if k < 1:
        raise ValueError(f"{KEY}: k must be >= 1, got {k}")
    return sorted(i for g in torch.unique(group).tolist()
                  for i in best_rows(torch.nonzero((group == g) & ~flagged).flatten().tolist(), rewards, k))


def codpo_pairs(rewards: torch.Tensor, group: torch.Tensor, flagged: torch.Tensor) -> list[tuple[int, int]]:
    """CODPO's preference pairs (chosen row, rejected row): per prompt, its best feasible sample against each of its
    violating ones; a prompt without both kinds gives none."""
    pairs = []
    for g in torch.unique(group).tolist():
        feasible = torch.nonzero((group == g) & ~flagged).flatten().tolist()
        rejected = torch.nonzero((group == g) & flagged).flatten().tolist()
        if feasible and rejected:
            best = best_rows(feasible, rewards, 1)[0]
            pairs += [(best, r) for r in rejected]
    return pairs


CGPO_LOGS = {
    "cgpo/violation_rate": ("CGPO: share of samples some judge flags (their calibrated reward is -1).",
                            "Falling towards 0 as the policy learns the constraints. Stuck near 1: every sample is "
                            "flagged and the groups carry no signal."),
    "cgpo/violation/format": ("CGPO: share of samples the format judge flags (empty, or cut at the token budget).",
                              "Falling towards 0 (after the warm start the policy ends its answers). Near 1 on an "
                              "untrained model that never emits EOS."),
    "cgpo/violation/length": ("CGPO: share of samples the length judge flags (an action over max_length_fraction of "
                              "max_new_tokens).",
                              "Low and falling. Rising: the policy pads its responses (the hack the length judge "
                              "guards against)."),
    "cgpo/violation/copy": ("CGPO: share of samples the copy judge flags (the response contains its prompt).",
                            "Near 0. Rising: the policy copies the question instead of answering (a reward hack)."),
}


@registry.reward_shaping(
    KEY, title="The Perfect Blend: Redefining RLHF with Mixture of Judges",
    summary="CRPG: a mixture of judges flags constraint violations; feasible samples get the calibrated reward "
            "sigma(r - group mean), flagged ones -1. Toy stand-in judges: format, length, prompt copying.",
    equation=r"r'_i = \begin{cases} \sigma(r_i - \bar r_{g(i)}) & \text{no judge flags } i \\ -1 & "
             r"\text{otherwise} \end{cases}",
    reads=("rewards", "group", "completions", "prompts", "truncated"), provides=("rewards",), logs=CGPO_LOGS,
    check=check_cgpo)
def cgpo(batch, ctx, *, judges=("format", "length", "copy"), baseline=None, max_length_fraction=0.75):
    """Replaces `rewards` [B] by `calibrated_rewards` under the judges' flags. judges: names of JUDGES and/or
    `Judge` callables (none: plain calibrated-reward PG). baseline: None for the group mean, or a float.
    max_length_fraction: the length judge's budget as a share of max_new_tokens. All defaults are our reading
    (abstract-only). Logs cgpo/violation_rate and cgpo/violation/<name> for each built-in judge."""
    check_cgpo(judges=judges, max_length_fraction=max_length_fraction)
    flagged, flags = violations(batch, ctx, judges, {"length": {"max_fraction": max_length_fraction}})
    ctx.metrics["cgpo/violation_rate"] = float(flagged.double().mean())
    for name, out in flags.items():
        if name in JUDGES:
            ctx.metrics[f"cgpo/violation/{name}"] = float(out.double().mean())
    rewards = calibrated_rewards(batch.rewards.double(), batch.group, flagged, baseline=baseline)
    return replace(batch, rewards=rewards.to(batch.rewards.dtype))
