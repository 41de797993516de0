"""DART's adaptive rollout count: fewer rollouts for the tasks the policy already solves.

    p_hat(q) = successes(q) / attempts(q)       the prompt's success rate over every rollout of it so far
    n(p_hat) = n_max                                              p_hat < low  (0.2)   or q never seen
             = round(n_max - (n_max - n_min) (p_hat - low) / (high - low))   low <= p_hat <= high
             = n_min                                              p_hat > high (0.8)
    n_max = the run's group size G (the `group_size` the rollout is asked for)

n(p_hat) is non-increasing in p_hat (a non-increasing line, then rounding, which keeps order). Each prompt of the step
is sampled n(p_hat) times: examples with the same count share one call of the `turns` rollout, and the rows are put
back in the step's prompt order, `group` indexing `examples` as the trainer expects. This saves rollouts (the step's
`rollouts` metric counts them): a solved prompt costs n_min, not G. The group baseline (GRPO) takes groups of
different sizes (`advantages.group.group_stats`).

Decisions where the paper is silent (the card: "schedule not known"): the bounds 0.2 / 0.8 and the linear ramp are the
card's; p_hat is the cumulative success rate of the prompt (successes / attempts over all its rollouts, a task's
success rate as DART's trajectory database counts it), kept as this component's state and updated after every step
from the step's rows of every rank (`observe`); a success is the verifier's score clamped to [0, 1] (1 for a solved
countdown puzzle). n_min = 2: the smallest group whose baseline carries a signal. A prompt recurs only when the
sampler revisits it: the recipe samples a fixed pool (`samplers.pool`), as DART trains on a fixed task set.
DART also adapts the trajectory length (max steps) to difficulty; at our scale (one-turn answers of 8-10 tokens)
that has nothing to act on and is not implemented.

Reference: Computer-use-agents/dart-gui @ e0e606d3 (the rollouter's task scheduling is not in the trainer files the
catalog names; the schedule above is the card's decision, not transcribed).
"""
from __future__ import annotations

import torch

from workbench import registry
from workbench.advantages.group import group_pass_rates
from workbench.batch import concat
from workbench.masks.dart import DART_TITLE
from workbench.rollout.turns import TURNS_PROVIDES, turns


DART_ROLLOUT_LOGS = {
    "dart/rollouts_per_prompt": ("DART: mean rollouts sampled per prompt this step, n(p_hat) averaged over the step's "
                                 "prompts (the run's group size for unseen prompts).",
                                 "group_size at first; falls towards n_min as the pool's prompts get solved. Flat at "
                                 "group_size: no prompt has been seen with a success rate above low."),
    "dart/known_prompts": ("DART: prompts whose success rate the rollout has recorded so far.",
                           "Rises to the pool's size within one epoch over it, then stays."),
}


def check_dart_rollout(*, n_min=2, low=0.2, high=0.8, group_size=None, **_) -> None:
    if isinstance(n_min, bool) or not isinstance(n_min, int) or n_min < 2:
        raise ValueError(f"n_min={n_min!r}: the fewest rollouts of a solved prompt must be a whole number >= 2 (a "
                         "group of one has no baseline); set n_min=2 or more")
    if not (isinstance(low, (int, float)) and isinstance(high, (int, float)) and 0 <= low < high <= 1):
        raise ValueError(f"low={low!r}, high={high!r}: the success rates where the count starts and stops falling "
                         "need 0 <= low < high <= 1 (the card's 0.2 and 0.8)")
    if group_size is not None and n_min > group_size:
        raise ValueError(f"n_min={n_min} is more than group_size={group_size} (n_max, the rollouts of an unsolved "
                         f"prompt): lower n_min or raise group_size")


def rollout_count(p_hat: float | None, *, n_min: int, n_max: int, low: float = 0.2, high: float = 0.8) -> int:
    """n(p_hat): n_max below `low` (and for an unseen prompt, p_hat None), n_min above `high`, the rounded line between
    (round half to even, as Python rounds)."""
    if p_hat is None or p_hat < low:
        return n_max
    if p_hat > high:
        return n_min
    return int(round(n_max - (n_max - n_min) * (p_hat - low) / (high - low)))


def success_rate(state: dict, prompt: str) -> float | None:
    """The prompt's successes / attempts so far, None before its first rollout."""
    seen = state.get("rates", {}).get(str(prompt))
    return None if seen is None else seen[0] / seen[1]


def empty_rates(**_) -> dict:
    """The rollout's state: {prompt: [successes, attempts]} over the run."""
    return {"rates": {}}


def observe_successes(state: dict, batch, ctx, **_) -> dict:
    """After a step: every rank's rows of it counted into their prompt's successes and attempts (the batch as the
    update saw it; rows a group transform added from other prompts count for theirs)."""
    if batch is None or batch.size == 0 or not batch.prompts:
        return state
    rates, prompts = group_pass_rates(batch)
    _, counts = torch.unique(batch.group, return_counts=True)  # group_pass_rates' dense order: sorted group ids
    seen = ctx.gather_objects([(p, float(r) * int(n), int(n)) for p, r, n in zip(prompts, rates.tolist(),
                                                                                 counts.tolist())])
    table = state.setdefault("rates", {})
    for prompt, successes, attempts in seen:
        had = table.get(prompt, [0.0, 0])
        table[prompt] = [had[0] + successes, had[1] + attempts]
    return state


@registry.rollout(
    "dart", title=DART_TITLE,
    summary="Adaptive rollout count: each prompt is sampled n(p_hat) times, n_max = G while its success rate so far "
            "is below 0.2 (or unknown), n_min = 2 above 0.8, linear between; solved prompts cost fewer rollouts.",
    equation=r"n(\hat p) = \mathrm{round}\Big(n_{max} - (n_{max} - n_{min})\,"
             r"\mathrm{clip}\big(\tfrac{\hat p - 0.2}{0.8 - 0.2}, 0, 1\big)\Big)",
    reads=(), provides=TURNS_PROVIDES, state=empty_rates, observe=observe_successes, check=check_dart_rollout,
    logs=DART_ROLLOUT_LOGS)
def dart_rollout(engine, task, examples, *, group_size: int, sampling, ctx=None, n_min=2, low=0.2, high=0.8):
    """The `turns` rollout with n(p_hat) rows for each example (n_max = `group_size`, so a transform asking for k
    extra rollouts gets at most k); rows of example i carry group i, in example order. Without a pipeline state
    (or greedy sampling) every example gets `group_size` rows: the plain rollout."""
    check_dart_rollout(n_min=n_min, low=low, high=high)
    state = ctx.state if ctx is not None and ctx.state is not None else None
    if state is None or sampling.greedy:
        return turns(engine, task, examples, group_size=group_size, sampling=sampling)
    counts = [min(group_size, rollout_count(success_rate(state, e.prompt), n_min=n_min, n_max=group_size, low=low,
                                            high=high)) for e in examples]
    parts = []
    for n in sorted(set(counts)):  # one engine call per distinct count
        ids = [i for i, c in enumerate(counts) if c == n]
        part = turns(engine, task, [examples[i] for i in ids], group_size=n, sampling=sampling)
        part.group = torch.tensor(ids, dtype=torch.long)[part.group]  # back to the step's example index
        parts.append(part)
    batch = parts[0] if len(parts) == 1 else concat(parts, pad_id=engine.tokenizer.pad_token_id)
    batch = batch.select(torch.sort(batch.group, stable=True).indices)
    ctx.metrics.update({"dart/rollouts_per_prompt": sum(counts) / max(len(counts), 1),
                        "dart/known_prompts": float(len(state.get("rates", {})))})
    return batch
