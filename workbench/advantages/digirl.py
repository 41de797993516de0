"""DigiRL: a step critic that classifies success, a step advantage from it, hard-filtered AWR, a top-10% filter.

    p(s)     = sigmoid(V(s))   the head's output at a step's first policy token is a success logit; the critic
                               is trained by binary cross-entropy on [G_s > 0] (`values.digirl`)
    G_s      = sum_k gamma^k r_{s+k}                         Monte Carlo return, gamma 0.95
    paper    A_h = lam^(H-h) r_H + (1 - lam^(H-h)) (p(s_{h+1}) + r_h - p(s_h))     doubly robust (`unverified`)
    code     A_h = 1[clamp(p(s_{h+1}) - p(s_h) - 0.05 + r_h + G_h, 0, 1) > 0]      (mode="code")
    loss     -A_h sum_{t in a_h} log pi(y_t)                 AWR with the weight A (`gpg`, agg seq-mean-token-sum)
    filter   keep trajectories with R - p(s_0) >= the batch's 0.9-quantile       (`top_quantile_keep`)

H is the row's last step, r_H its reward; p(s_{H+1}) = 0 (nothing follows the last step: the code reads the critic
on the terminal screen, which a text episode does not have). lam = 1 gives the Monte Carlo return of a
terminal-reward episode (r_H); lam = 0 the one-step TD advantage p(s_{h+1}) + r_h - p(s_h).

Reading. One head (the code has two critics V1, V2 and takes min(p1, p2); and a separate trajectory critic
V_traj(instruction) for the filter): here p(s_0), the step critic at the episode's first state, is the
trajectory baseline. The top-10% curriculum is a replay-buffer filter in the code; here it is the token mask
`digirl` (`digirl_filter` below, run after the advantage): it zeroes the policy mask of the rows outside the top 10% of R - p(s_0) of
the batch (on-policy, not a replay buffer and not a sampler: the workbench's samplers choose prompts before
rollout, and buffers are not drawn by the trainer); the critic still trains on every row (`value_mask`).
lam = 0.5: our choice (the paper's value was not located). gamma 0.95: `add_mc_return`'s default (the shipped
`scripts/config/main/default.yaml` passes gamma 0.5).

Reference: DigiRL-agent/digirl @ c74ec34 `digirl/algorithms/digirl/trainer.py` `DigiRLTrainer.actor_loss`
(the indicator advantage; the code evaluates the next-state critic with the current action), `critic_loss`
(cross-entropy on [mc_return > 0]), `digirl/environment/env_utils.py` `add_mc_return`,
`digirl/algorithms/offpolicy_train_loop.py` `filter_buffer` (cutoff = np.quantile(R - V_traj, 0.9), keep >=).
"""
from __future__ import annotations

import torch

from workbench import registry
from workbench.advantages.base import check_discounts
from workbench.advantages.step_critic import broadcast_steps, step_gae, step_rewards, step_targets, step_values
from workbench.batch import RolloutBatch

DIGIRL_TITLE = "DigiRL: Training In-The-Wild Device-Control Agents with Autonomous Reinforcement Learning"
MODES = ("paper", "code")


def mc_returns(rewards: torch.Tensor, valid: torch.Tensor, gamma: float) -> torch.Tensor:
    """[B, S] G_s = r_s + gamma G_{s+1} over each row's steps (`add_mc_return`)."""
    return step_gae(rewards, torch.zeros_like(rewards), valid, gamma, 1.0)[1]


def next_step(x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """[B, S] x_{s+1} on valid steps, 0 at each row's last step."""
    shifted = torch.cat([x[:, 1:], torch.zeros_like(x[:, :1])], 1)
    return shifted * torch.cat([valid[:, 1:], torch.zeros_like(valid[:, :1])], 1) * valid


def indicator_advantage(p, p_next, rewards, returns, margin: float = 0.05) -> torch.Tensor:
    """The code's weight: 1 where clamp(p' - p - margin + r + G, 0, 1) > 0, else 0 (`actor_loss`)."""
    raw = p_next - p - margin + rewards + returns
    return (raw.clamp(0, 1) > 0).to(p.dtype)


def doubly_robust_advantage(p, p_next, rewards, valid, lam: float) -> torch.Tensor:
    """[B, S] lam^(H-h) r_H + (1 - lam^(H-h)) (p(s_{h+1}) + r_h - p(s_h)) (the paper's estimator)."""
    S = valid.shape[1]
    steps = torch.arange(S, device=valid.device)[None, :]
    H = (valid.long() * steps).amax(-1, keepdim=True)                      # [B, 1] last step
    r_H = rewards.gather(1, H)                                              # [B, 1]
    w = torch.tensor(float(lam), dtype=rewards.dtype) ** (H - steps).clamp(min=0).to(rewards.dtype)
    return (w * r_H + (1 - w) * (p_next + rewards - p)) * valid


def digirl_steps(batch: RolloutBatch, gamma: float):
    """(p [B, S], p_next, r, G, first, valid): the critic's success probabilities and the step returns."""
    V, first, _, valid = step_values(batch)
    p = torch.sigmoid(V) * valid
    r = step_rewards(batch, V.shape[1])
    return p, next_step(p, valid), r, mc_returns(r, valid, gamma), first, valid


def digirl_targets(batch: RolloutBatch, *, mode="paper", lam=0.5, gamma=0.95, margin=0.05):
    """(returns [B, T], value_mask [B, T]): the Monte Carlo return G_s at each step's first policy token (the
    classifier's label is G_s > 0, `values.digirl`)."""
    _, _, _, G, first, valid = digirl_steps(batch, gamma)
    return step_targets(G, first, valid, batch)


@registry.advantage(
    "digirl", title=DIGIRL_TITLE,
    summary="Step advantage from a success-classifier critic: the paper's doubly-robust mix of the final reward and "
            "the one-step TD error, or the code's 0/1 indicator (hard-filtered AWR weight).",
    equation=r"A_h = \lambda^{H-h} r_H + (1-\lambda^{H-h})\big(V(s_{h+1}) + r_h - V(s_h)\big);\ "
             r"\text{code: } A_h = \mathbb{1}[\mathrm{clip}(V(s_{h+1}) - V(s_h) - 0.05 + r_h + G_h, 0, 1) > 0]",
    reads=("values", "turn"), needs=("multi_turn",), targets=digirl_targets, choices={"mode": MODES},
    check=check_discounts)
def digirl(batch: RolloutBatch, *, mode="paper", lam=0.5, gamma=0.95, margin=0.05):
    """DigiRL advantage [B, T] (not whitened: an AWR weight). Reads `values` (success logits at rollout time),
    `turn`, `mask`, `rewards`, `turn_rewards`, `token_rewards`. mode "paper" (doubly robust, lam) or "code"
    (indicator, margin 0.05, gamma of the Monte Carlo return)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    p, p_next, r, G, _, valid = digirl_steps(batch, gamma)
    if mode == "code":
        adv = indicator_advantage(p, p_next, r, G, margin) * valid
    else:
        adv = doubly_robust_advantage(p, p_next, r, valid, lam)
    return broadcast_steps(adv, batch).to(batch.mask.dtype)


def check_quantile(*, quantile=0.9, **_) -> None:
    if not 0.0 <= quantile <= 1.0:
        raise ValueError(f"quantile must be in [0, 1], got {quantile}")


def top_quantile_keep(scores: torch.Tensor, quantile: float = 0.9) -> torch.Tensor:
    """[N] bool: scores >= their `quantile` (linear interpolation, as np.quantile), the code's `filter_buffer`."""
    check_quantile(quantile=quantile)
    cutoff = torch.quantile(scores.double(), quantile)
    return scores.double() >= cutoff


def trajectory_scores(batch: RolloutBatch, clamp=(1e-4, 1 - 1e-4)) -> torch.Tensor:
    """[B] R_i - p(s_0): the outcome over the critic's success probability at the first state (the code's
    `label_trajectories` baseline, clamped to [1e-4, 1 - 1e-4])."""
    batch.require("rewards")
    V, _, _, _valid = step_values(batch)
    baseline = torch.sigmoid(V[:, 0]).clamp(*clamp)
    return batch.rewards.double() - baseline


DIGIRL_FILTER_LOGS = {
    "filtered_frac/digirl": ("DigiRL: share of rollouts outside the top 10% of R - V(s_0) (the trajectory filter), "
                             "left out of the policy loss.",
                             "About 0.9 by construction (ties at the cutoff keep more); much less: many rows tie "
                             "(e.g. all failed with the same baseline)."),
}


@registry.token_mask(
    "digirl", title=DIGIRL_TITLE,
    summary="Keep the policy tokens of the trajectories whose outcome minus the critic's first-state success "
            "probability is in the batch's top 10% (DigiRL's replay filter, on-policy).",
    equation=r"m_{i,\cdot} \leftarrow m_{i,\cdot}\,\mathbb{1}\big[R_i - V(s_{i,0}) \ge Q_{0.9}(R - V(s_0))\big]",
    reads=("values", "turn"), logs=DIGIRL_FILTER_LOGS, check=check_quantile)
def digirl_filter(batch: RolloutBatch, *, quantile=0.9) -> torch.Tensor:
    """Token mask [B, T]: the rows whose R_i - p(s_0) is below the batch's `quantile` (0.9: the code's `1 - 0.1`;
    0.0 keeps every row) are zeroed. Reads `mask`, `rewards`, `values`, `turn`. The critic's `value_mask` is left
    alone: it trains on every row, as the code's critic trains on the whole replay buffer."""
    keep = top_quantile_keep(trajectory_scores(batch), quantile)
    return batch.mask * keep[:, None].to(batch.mask.dtype)
