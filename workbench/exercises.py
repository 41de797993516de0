"""Automatic checks for the notebooks' exercises: each answer is compared with the library's own math."""
from __future__ import annotations

import torch

from workbench.advantages.group import grpo
from workbench.batch import RolloutBatch
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
