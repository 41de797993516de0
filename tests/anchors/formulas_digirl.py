"""DigiRL transcribed by hand from DigiRL-agent/digirl @ c74ec34029eb5092bf17a64211f2d0284c7d1ba8 (used by
tests/anchors/test_digirl.py):

    digirl/environment/env_utils.py           add_trajectory_reward, add_mc_return (discounted step returns)
    digirl/algorithms/digirl/trainer.py       DigiRLTrainer.actor_loss (the critics' success probabilities ->
                                              the indicator advantage -> -mean(log_prob * advantage)),
                                              DigiRLTrainer.critic_loss (CrossEntropyLoss on [mc_return > 0])
    digirl/algorithms/offpolicy_train_loop.py label_trajectories (baseline clamp), filter_buffer (the 0.9-quantile
                                              cutoff on trajectory_reward - baseline, keep >=)

Models are replaced by their outputs: the critics' 2-class logits (v1, v2, nv1, nv2) and the trajectory
critic's; the agent's summed action log-probs. A trajectory is a list of {"reward": r} dicts. Variable names and
the order of operations are the code's.
"""
from __future__ import annotations

import numpy as np
import torch


def add_trajectory_reward(trajectory):
    trajectory_reward = np.sum([d["reward"] for d in trajectory])
    for d in trajectory:
        d.update({"trajectory_reward": trajectory_reward})
    return trajectory


def add_mc_return(trajectory, gamma=0.95):
    trajectory_rewards = np.array([d["reward"] for d in trajectory]).reshape(1, -1)
    gamma_row = np.cumprod(np.ones((1, trajectory_rewards.shape[1])) * gamma)
    gamma_matrix = np.triu(gamma_row.reshape(1, -1) / gamma_row.reshape(-1, 1))
    mc_returns = np.sum(trajectory_rewards * gamma_matrix, axis=1)
    for d, mc in zip(trajectory, mc_returns):
        d.update({"mc_return": mc})
    return trajectory


def actor_advantage(v1, v2, nv1, nv2, reward, mc_return):
    """actor_loss up to `advantage = (advantage > 0)` (v*, nv*: [N, 2] critic logits)."""
    softmax = torch.nn.Softmax(dim=-1)
    v1 = softmax(v1)[:, 1]
    v2 = softmax(v2)[:, 1]
    nv1 = softmax(nv1)[:, 1]
    nv2 = softmax(nv2)[:, 1]
    v = torch.minimum(v1, v2).flatten()
    nv = torch.minimum(nv1, nv2).flatten()
    advantage = nv - v - 0.05 + reward + mc_return
    advantage = torch.clamp(advantage, 0, 1)
    advantage = (advantage > 0).to(dtype=v.dtype)
    return advantage


def actor_pg_loss(log_prob, advantage):
    """actor_loss: pg_loss = -mean(log_prob * advantages), log_prob summed over the action's tokens."""
    advantages = advantage.flatten()
    pg_loss = -torch.mean(log_prob.flatten() * advantages)
    return pg_loss


def critic_v1_loss(v1, mc_return):
    """critic_loss's v1 term: CrossEntropyLoss(v1, (mc_return > 0).long())."""
    criterion = torch.nn.CrossEntropyLoss()
    v1 = v1.reshape(-1, 2)
    regression_target = (mc_return > 0).long()
    v1_loss = criterion(v1, regression_target)
    return v1_loss


def filter_kept(trajectory_rewards, baselines):
    """filter_buffer's selection (baselines: the trajectory critic's success probabilities, clamped as
    label_trajectories does) -> indices of the kept trajectories."""
    baselines = torch.clamp(torch.as_tensor(baselines), 1e-4, 1 - 1e-4).numpy().flatten()
    trajectory_rewards = np.array(trajectory_rewards).flatten()
    baselines = trajectory_rewards - baselines
    cutoff = np.quantile(baselines, 1 - 0.1)
    kept = []
    for i, b in enumerate(baselines):
        if b >= cutoff:
            kept.append(i)
    return kept
