"""The exercises of notebook 01_grpo (GRPO end to end): each answer is checked against the library's own math."""
from __future__ import annotations

import torch

from workbench.advantages.group import grpo
from workbench.batch import RolloutBatch
from workbench.exercises.answers import all_near
from workbench.objectives.ppo import ppo_clip


def check_grpo_by_hand(answer, rewards=(1.0, 0.0, 0.0, 0.0)) -> str:
    """Exercise: GRPO advantages of one group (Bessel std, eps = 0)."""
    r = torch.tensor(rewards, dtype=torch.float64)
    expected = grpo(RolloutBatch.from_rewards(r), eps=0.0)[:, 0]
    given = torch.tensor(answer, dtype=torch.float64)
    if given.shape != expected.shape or not torch.allclose(given, expected, atol=1e-3):
        raise AssertionError(f"not quite: subtract the group mean {r.mean():.3f}, divide by the Bessel std "
                             f"{r.std():.3f} (you gave {answer})")
    return "correct"


def zero_gradient_case(ratio: float = 1.3, eps: float = 0.2) -> str:
    """Which advantage sign gives zero PPO-clip gradient at this ratio: "A=+1" or "A=-1"."""
    for sign, label in ((1.0, "A=+1"), (-1.0, "A=-1")):
        logp = torch.tensor([[float(torch.log(torch.tensor(ratio)))]], dtype=torch.float64, requires_grad=True)
        loss, _ = ppo_clip(logp, torch.zeros(1, 1, dtype=torch.float64), torch.full((1, 1), sign, dtype=torch.float64),
                           torch.ones(1, 1, dtype=torch.float64), eps_low=eps, eps_high=eps)
        (grad,) = torch.autograd.grad(loss, logp)
        if grad.item() == 0:
            return label
    return "neither"


def check_zero_gradient(answer: str, ratio: float = 1.3, eps: float = 0.2) -> str:
    expected = zero_gradient_case(ratio, eps)
    if answer != expected:
        raise AssertionError(f"not quite: the clipped branch is active when A>0 and r>1+eps, or A<0 and "
                             f"r<1-eps (ratio {ratio}, eps {eps})")
    return "correct"


STD_EXERCISE_GROUPS = ((1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0), (1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0))


def grpo_sum_of_squares(groups=STD_EXERCISE_GROUPS, **kw) -> tuple[float, ...]:
    """Σ_i A_i² of each group under the registered GRPO advantage (eps = 0 unless given; other kw go to grpo)."""
    kw = {"eps": 0.0, **kw}
    return tuple(float((grpo(RolloutBatch.from_rewards(r), **kw)[:, 0] ** 2).sum()) for r in groups)


def check_grpo_sum_of_squares(answer, groups=STD_EXERCISE_GROUPS) -> str:
    """Exercise: the total squared GRPO advantage Σ A_i² of a 1-of-8 and a 4-of-8 group (Bessel std, eps = 0)."""
    if all_near(answer, grpo_sum_of_squares(groups)):
        return "correct"
    if all_near(answer, grpo_sum_of_squares(groups, unbiased=False)):
        hint = "that is the population std; GRPO divides by the Bessel (G - 1) std"
    elif all_near(answer, grpo_sum_of_squares(groups, scale="none")):
        hint = "that is Σ (R_i - mean)², Dr.GRPO's advantage without the std division; divide by std² first"
    else:
        hint = ("A_i = (R_i - mean) / std with std² = Σ_j (R_j - mean)² / (G - 1): write Σ_i A_i² with that std² "
                "and simplify (answer one number per group)")
    raise AssertionError(f"not quite ({answer}): {hint}")
