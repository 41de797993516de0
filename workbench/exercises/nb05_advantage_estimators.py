"""The exercises of notebook 05_advantage_estimators (advantage estimators): each answer is checked against the
library's own math."""
from __future__ import annotations

import torch

from workbench.advantages.group import grpo
from workbench.batch import RolloutBatch
from workbench.exercises.answers import all_near


def check_rloo_by_hand(answer, rewards=(1.0, 0.0, 0.0, 0.0)) -> str:
    """Exercise: RLOO advantages of one group (each reward minus the mean of the OTHER rewards)."""
    from workbench.advantages.group import rloo

    expected = rloo(RolloutBatch.from_rewards(rewards))[:, 0]
    given = torch.tensor(answer, dtype=torch.float64)
    if given.shape != expected.shape or not torch.allclose(given, expected, atol=1e-3):
        raise AssertionError(f"not quite: for each sample subtract the mean of the other {len(rewards) - 1} "
                             f"rewards (you gave {answer})")
    return "correct"


def largest_advantage_success_rate(G: int = 8) -> float:
    """The success rate p = k/G (0 < k < G) at which a correct answer gets the largest default GRPO advantage."""
    rewards, group = [], []
    for k in range(1, G):
        rewards += [1.0] * k + [0.0] * (G - k)
        group += [k] * G
    adv = grpo(RolloutBatch.from_rewards(rewards, group))[:, 0].view(G - 1, G)
    return (int(torch.argmax(adv[:, 0])) + 1) / G  # column 0 is a correct answer in every group


def check_largest_advantage_rate(answer, G: int = 8) -> str:
    """Exercise: at which group success rate does a correct answer get the largest GRPO advantage?"""
    expected = largest_advantage_success_rate(G)
    if not abs(float(answer) - expected) <= 1e-6:
        raise AssertionError(f"not quite: with k of {G} answers correct, a correct answer gets (1 - p) / std "
                             f"with std = sqrt(p (1 - p) G / (G - 1)); which k/G makes it largest? "
                             f"(you gave {answer})")
    return "correct"


def opo_advantages(rewards=(1.0, 0.0, 0.0, 0.0), lengths=(2, 6, 4, 4)) -> list[float]:
    """The registered `opo` advantages of one group of answers with these rewards and lengths."""
    from workbench import registry

    batch = RolloutBatch.from_rewards(rewards, None, lengths)
    return registry.get("advantage", "opo").fn(batch)[:, 0].tolist()


def check_opo_by_hand(answer, rewards=(1.0, 0.0, 0.0, 0.0), lengths=(2, 6, 4, 4)) -> str:
    """Exercise: OPO advantages of one group (the baseline is the length-weighted mean reward)."""
    if all_near(answer, opo_advantages(rewards, lengths)):
        return "correct"
    mean = sum(rewards) / len(rewards)
    if all_near(answer, [r - mean for r in rewards]):
        hint = f"that baseline is the plain mean {mean:g}; OPO weights each reward by its answer's length"
    else:
        hint = (f"baseline b = Σ |y_i| R_i / Σ |y_i| over the group (lengths {list(lengths)}), then A_i = R_i - b "
                "(one number per answer)")
    raise AssertionError(f"not quite ({answer}): {hint}")
