"""VL-DAC transcribed by hand from corl-team/VL-DAC @ 5da27838c5735b565aa55b1d312654e6da9e130c (the two files are
unchanged since a3a5457), used by tests/anchors/test_vl_dac.py:

    a2c_ppo_acktr/storage.py    RolloutStorage.compute_returns   (the use_proper_time_limits + use_gae branch:
                                                                   GAE over environment steps, `bad_masks`)
    a2c_ppo_acktr/algo/ppo.py   PPO.update                       (advantages = returns - value_preds, z-score
                                                                   with .std() + 1e-8; the per-token action loss
                                                                   of one minibatch with the ratio > 10 rule)

Storage tensors are [num_steps (+1), num_processes, 1], one process stream holding consecutive episodes
(masks[step + 1] = 0 after an episode's last step). Variable names and the order of operations are the code's;
the class state is passed in and returned.
"""
from __future__ import annotations

import torch


def compute_returns(rewards, value_preds, masks, bad_masks, next_value, gamma, gae_lambda):
    """RolloutStorage.compute_returns(next_value, use_gae=True, gamma, gae_lambda, use_proper_time_limits=True)
    -> returns [num_steps + 1, P, 1] (value_preds[-1] is overwritten with next_value, as the code does)."""
    value_preds = value_preds.clone()
    returns = torch.zeros_like(value_preds)
    value_preds[-1] = next_value
    gae = 0
    for step in reversed(range(rewards.size(0))):
        delta = (
            rewards[step]
            + gamma * value_preds[step + 1] * masks[step + 1]
            - value_preds[step]
        )
        gae = delta + gamma * gae_lambda * masks[step + 1] * gae
        gae = gae * bad_masks[step + 1]
        returns[step] = gae + value_preds[step]
    return returns


def normalized_advantages(returns, value_preds):
    """PPO.update's first lines: advantages = returns[:-1] - value_preds[:-1], z-scored over the whole storage."""
    advantages = returns[:-1] - value_preds[:-1]
    advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    return advantages


def per_token_action_loss(action_log_probs, old_action_log_probs_batch, adv_targ, clip_param):
    """PPO.update's action loss of one minibatch (one environment step: mini_batch_size 1)."""
    per_token_log_ratio = action_log_probs - old_action_log_probs_batch
    per_token_ratio = torch.exp(per_token_log_ratio)
    surr1 = per_token_ratio * adv_targ
    surr2 = (
        torch.clamp(per_token_ratio, 1.0 - clip_param, 1.0 + clip_param)
        * adv_targ
    )
    if torch.any(per_token_ratio > 10):
        per_token_action_loss = -surr2
    else:
        per_token_action_loss = -torch.min(surr1, surr2)
    return per_token_action_loss
