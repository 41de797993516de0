"""EAPO (IterResearch): geometric discounting of the outcome over the rounds of an episode.

    r_t = gamma^(T - t) R_T      t = 1..T the research rounds, R_T the episode's outcome (0-indexed here: the
                                 round t of an episode of T rounds gets gamma^(T - 1 - t) R)

IterResearch trains on each round as a sample of its own (its Markovian workspace as the prompt, the round's
action as the response), normalizes advantages over all round samples of a question's group (GSPO) and cuts the
sample set to a multiple of the data-parallel size. Here the round samples are made by the group transform
`eapo` (workbench/transforms/eapo.py: one row per round, the episode's history as its prompt, plus the
downsampling), and this reward shaping discounts each round row's reward; any group advantage (grpo) then
normalizes over a group's round rows, and GSPO's sequence ratio is per round. That is the representation a
GRPO/GSPO recipe trains on unchanged: per-round rows, not per-step rewards inside a trajectory row (`grpo` sums
`token_rewards` into one number per row, which would reward long episodes).
"""
from __future__ import annotations

from dataclasses import replace

import torch

from workbench import registry

EAPO_TITLE = "IterResearch: Rethinking Long-Horizon Agents via Markovian State Reconstruction"
ROUND, ROUNDS = "round", "rounds"  # keys the group transform adds to a round row's step info: t and T


def discount(to_go: torch.Tensor, gamma: float) -> torch.Tensor:
    """gamma^(T - 1 - t) for rounds `to_go` = T - 1 - t before the terminal round (float64, same shape)."""
    return gamma ** to_go.to(torch.float64)


def rounds_to_go(batch) -> torch.Tensor:
    """[B] T - 1 - t of each row: from the round markers of a round row (the `eapo` group transform), 0 for a
    one-step row (a one-turn task, or no turn_info); a multi-step row is a whole episode, which EAPO cannot
    discount within one row (ValueError)."""
    out = torch.zeros(batch.size, dtype=torch.long)
    for i, steps in enumerate(batch.turn_info or []):
        if len(steps) == 1 and ROUND in steps[0]:
            out[i] = steps[0][ROUNDS] - 1 - steps[0][ROUND]
        elif len(steps) > 1:
            raise ValueError(f"eapo: row {i} is a whole episode of {len(steps)} rounds; EAPO discounts per round "
                             f"sample: put group_transforms=[use('eapo')] in the recipe (one row per round)")
    return out


def check_gamma(gamma: float) -> None:
    if not 0 < gamma <= 1:
        raise ValueError(f"eapo: gamma must be in (0, 1], got {gamma}")


EAPO_REWARD_LOGS = {
    "eapo/discount": ("EAPO: mean discount gamma^(T-1-t) over the round rows (1 when every episode is one round).",
                      "Rising towards 1 as episodes shorten; 1 on a one-turn task. Low: long episodes."),
}


@registry.reward_shaping(
    "eapo", title=EAPO_TITLE,
    summary="Efficiency-aware reward: round t of an episode of T rounds gets gamma^(T-t) R_T, so a shorter successful "
            "episode earns more per round (round rows from the group transform eapo).",
    equation=r"r_t = \gamma^{T-t}\,R_T", reads=("rewards",), provides=("rewards",), logs=EAPO_REWARD_LOGS)
def eapo_rewards(batch, ctx, *, gamma=0.9):
    """rewards [B] <- gamma^(T - 1 - t) rewards on each round row (`rounds_to_go`); the terminal round keeps R.

    gamma: the paper gives no value (catalog: "gamma not known"). Our reading: 0.9, for episodes of a few rounds
    (ours take 2-7: the first round of a 5-round win gets 0.66 R); runs of hundreds of rounds need gamma near 1.
    gamma = 1 broadcasts R to every round unchanged. Logs eapo/discount (mean gamma^(T - 1 - t) over rows).
    """
    check_gamma(gamma)
    factor = discount(rounds_to_go(batch), gamma)  # [B]
    ctx.metrics["eapo/discount"] = float(factor.mean())
    return replace(batch, rewards=(batch.rewards.double() * factor).to(batch.rewards.dtype))
