"""A^3T's binarized reward: policy gradient with A = +1 on a successful trajectory and -1 on a failed one.

    R~(tau) = +1 if R(tau) > success, else -1          (success_only: 0 instead of -1)
    A_{tau,t} = R~(tau) m_{tau,t}
    L = - (1 / sum m) sum_tau R~(tau) sum_t m_{tau,t} log pi(y_t | x, y_<t)     with objective `gpg` (REINFORCE),
                                                                               token mean

No baseline and no normalization: the loss is the NLL of the successes minus the NLL of the failures, so on
success-only data it is the SFT loss (`workbench.train.sft.sft_loss`, a token-mean NLL), and a failed trajectory
pushes its log-likelihood down exactly as hard as an identical successful one pushes it up.

Decisions (the card: abstract only, "policy gradient with binarized rewards"): the loss is not a new objective but
REINFORCE (`gpg`: -A log pi, ratio 1) composed with this advantage; token mean (the card). success = reward above
`success` (0.5: the 0/1 verifier's 1). success_only=True gives failures R~ = 0; with the token mask
`min-abs-advantage` (threshold 0.5) they leave the mask too and the loss is the token-mean NLL of the successes
alone (A^3T's success-only ablation, SFT on the policy's own successes). The trajectories come from the policy and
from the buffer of `workbench.transforms.a3t` (earlier rounds' successes): no importance correction, as the card.

Reference: none located (REFERENCES-AGENTS.md).
"""
from __future__ import annotations

import torch

from workbench import registry
from workbench.advantages.base import broadcast, sequence_rewards
from workbench.batch import RolloutBatch

A3T_TITLE = "ReAct Meets ActRe: When Language Agents Enjoy Training Data Autonomy"


def binarized_rewards(rewards: torch.Tensor, success: float = 0.5, success_only: bool = False) -> torch.Tensor:
    """[B] R~ = +1 where R > success, else -1 (0 with success_only)."""
    failed = torch.zeros_like(rewards) if success_only else -torch.ones_like(rewards)
    return torch.where(rewards > success, torch.ones_like(rewards), failed)


def check_a3t_advantage(*, success=0.5, success_only=False, **_) -> None:
    if isinstance(success, bool) or not isinstance(success, (int, float)):
        raise ValueError(f"success must be a reward threshold (a number; a trajectory succeeds when its reward is "
                         f"above it, 0.5 for a 0/1 verifier), got {success!r}")
    if not isinstance(success_only, bool):
        raise ValueError(f"success_only must be true or false (true: failures get 0, SFT on successes), got "
                         f"{success_only!r}")


@registry.advantage(
    "a3t", title=A3T_TITLE,
    summary="Binarized reward as the advantage, no baseline: +1 on every token of a successful trajectory, -1 on a "
            "failed one (0 with success_only); with REINFORCE (gpg) the loss is NLL(successes) - NLL(failures).",
    equation=r"A_{\tau,t} = \tilde R(\tau)\,m_{\tau,t},\quad \tilde R(\tau) = \begin{cases} +1 & R(\tau) > s \\ "
             r"-1 & \text{otherwise} \end{cases}",
    check=check_a3t_advantage)
def a3t_advantage(batch: RolloutBatch, *, success=0.5, success_only=False):
    """Reads `rewards` (+ summed `token_rewards`) and `mask`; A [B, T] = R~ broadcast over the mask."""
    check_a3t_advantage(success=success, success_only=success_only)
    return broadcast(binarized_rewards(sequence_rewards(batch), success, success_only), batch.mask)
