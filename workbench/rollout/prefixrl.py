"""PrefixRL: on-policy RL on problems conditioned on a prefix of a successful trace; the prefix is context only.

    x' = x ⊕ y*_{1:h}      y* a successful trace, h = round(f |y*|) characters, f from a grid of fractions
    y ~ pi_theta(. | x')   the policy continues the trace; the prefix's tokens have mask 0 (no loss, no IS weight)
    R(x, y*_{1:h} ⊕ y)     the environment scores the prefix and its continuation as one answer
    per group: f = 0 for a share `unprefixed` of the step's groups (the unprefixed problems the method is for);
    otherwise f drawn among the grid fractions whose running pass rate lies in [0.2, 0.8]
    (the fraction nearest 0.5 when none does)

On a problem the policy never solves, all G rewards are 0 and GRPO learns nothing; continuing from a long enough
prefix of a solution it succeeds sometimes, and the gradient on the continuation tokens is ordinary on-policy RL on
x'. The objective stays consistent with RL on the prefixed problems; the paper reports "back-generalization" to the
unprefixed ones.

Reference: no implementation located (paper arXiv 2601.18795; REFERENCES-AGENTS.md). The h schedule and the mixing
ratio are not given; this follows the catalog's reading (a grid of trace fractions, keep those whose pass rate is in
[0.2, 0.8], 50 % unprefixed). Our choices: the pass rates are kept per grid fraction over the run (an exponential
moving average of each group's pass rate, `decay`, unseen fractions counted as 0.5), not per problem (a procedural
task rarely repeats a problem); a pass is an episode return >= 1 (the verifier's "solved"). At toy scale the trace
is the task's exact solution (`Task.expert_actions`), not samples of another model: a multi-turn trace's prefix is
its first whole actions replayed through the environment, then the start of the next one (`Given`).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

import torch

from workbench import registry
from workbench.rollout.turns import TURNS_PROVIDES, Given, episode_batch, play
from workbench.tasks.guidance import check_fraction, solution_actions, solution_prefix

PREFIXRL_TITLE = "Reuse your FLOPs: Scaling RL on Hard Problems by Conditioning on Very Off-Policy Prefixes"
GRID = (0.25, 0.5, 0.75)
BAND = (0.2, 0.8)  # pass rates worth training on: neither all-fail nor all-pass groups

PREFIXRL_LOGS = {
    "prefixrl/prefixed_groups": ("PrefixRL: share of the step's groups conditioned on a solution prefix.",
                                 "About 1 - unprefixed (0.5 by default)."),
    "prefixrl/prefix_fraction": ("PrefixRL: mean prefix length (fraction of the solution) over the prefixed groups.",
                                 "Falls over training as shorter prefixes reach a 0.2-0.8 pass rate; stuck at the "
                                 "longest: even long prefixes rarely lead to a solution."),
    "prefixrl/pass_prefixed": ("PrefixRL: pass rate of the prefixed samples this step.",
                               "Within [0.2, 0.8] once the rates are learnt: groups with reward spread."),
    "prefixrl/pass_unprefixed": ("PrefixRL: pass rate of the unprefixed samples this step.",
                                 "Rises over training (back-generalization); flat at 0: the prefixes do not transfer."),
}


@dataclass
class PassRates:
    """Running pass rate of the groups sampled at each grid fraction (exponential moving average)."""

    rate: dict = field(default_factory=dict)  # fraction -> pass rate

    def of(self, fraction: float) -> float:
        return self.rate.get(fraction, 0.5)

    def update(self, fraction: float, pass_rate: float, decay: float) -> None:
        self.rate[fraction] = decay * self.of(fraction) + (1 - decay) * pass_rate


def check_prefixrl(*, grid=GRID, unprefixed=0.5, decay=0.9, **_) -> None:
    if not grid or any(check_fraction("grid", f) <= 0 for f in grid) or len(set(grid)) != len(grid):
        raise ValueError(f"grid={tuple(grid)!r}: give distinct prefix fractions in (0, 1] (0 is the unprefixed "
                         "problem, set by `unprefixed`)")
    check_fraction("unprefixed", unprefixed)
    if not 0 <= decay < 1:
        raise ValueError(f"decay={decay}: the pass rates' moving-average decay must be in [0, 1)")


def choose_fraction(rates: PassRates, grid, rng: random.Random) -> float:
    """A grid fraction whose pass rate is within BAND, uniformly; the one nearest 0.5 when none is."""
    inside = [f for f in grid if BAND[0] <= rates.of(f) <= BAND[1]]
    return rng.choice(inside) if inside else min(grid, key=lambda f: (abs(rates.of(f) - 0.5), f))


@registry.rollout(
    "prefixrl", title=PREFIXRL_TITLE,
    summary="Half the groups continue a prefix of the task's solution (a fraction whose running pass rate is in "
            "[0.2, 0.8]); prefix tokens are context with mask 0; the other half are the plain problems.",
    equation=r"y \sim \pi_\theta(\cdot \mid x \oplus y^\star_{1:h}),\quad m_t = 0\ \text{on}\ y^\star_{1:h},\quad "
             r"h = f\,|y^\star|,\ \ \hat p(f) \in [0.2, 0.8]",
    reads=(), provides=TURNS_PROVIDES, needs=("solution",), state=PassRates, logs=PREFIXRL_LOGS,
    check=check_prefixrl)
def prefixrl(engine, task, examples, *, group_size: int, sampling, ctx=None, grid=GRID, unprefixed=0.5, decay=0.9):
    """Rows grouped per example, as `turns`; a prefixed group's rows all start from the same `Given` prefix (its
    tokens in the response with mask 0). The fractions are drawn with `ctx.rng()` from the pass rates in
    `ctx.state` (checkpointed), which this call then updates from every rank's groups (`ctx.gather`). Greedy
    rollouts (evaluation) are never prefixed. Logs prefixrl/prefixed_groups, prefix_fraction, pass_prefixed,
    pass_unprefixed."""
    check_prefixrl(grid=grid, unprefixed=unprefixed, decay=decay)
    rates = ctx.state if ctx is not None and ctx.state is not None else PassRates()
    rng = ctx.rng() if ctx is not None else random.Random(0)
    n = len(examples)
    plain = set(rng.sample(range(n), round(unprefixed * n))) if not sampling.greedy else set(range(n))
    fractions = [0.0 if g in plain else choose_fraction(rates, grid, rng) for g in range(n)]
    given = [Given(*solution_prefix(solution_actions(task, e), f)) if f else Given()
             for e, f in zip(examples, fractions)]
    played = play(engine, task, examples, group_size=group_size, sampling=sampling,
                  given=[start for start in given for _ in range(group_size)])
    batch = episode_batch(played, group_size, engine.tokenizer.pad_token_id)
    passed = (batch.rewards >= 1).float().view(n, group_size).mean(-1).tolist()  # [n] pass rate per group
    gather = ctx.gather if ctx is not None else (lambda x: x)  # every rank's groups: all ranks keep the same rates
    for f, p in zip(gather(torch.tensor(fractions)).tolist(), gather(torch.tensor(passed)).tolist()):
        if f:
            rates.update(f, p, decay)
    if ctx is not None:
        prefixed = [g for g in range(n) if fractions[g]]
        ctx.metrics.update({
            "prefixrl/prefixed_groups": len(prefixed) / n,
            "prefixrl/prefix_fraction": sum(fractions) / len(prefixed) if prefixed else 0.0,
            "prefixrl/pass_prefixed": mean([passed[g] for g in prefixed]),
            "prefixrl/pass_unprefixed": mean([passed[g] for g in range(n) if not fractions[g]])})
    return batch


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0
