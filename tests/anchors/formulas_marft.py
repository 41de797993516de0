"""Re-derivation of MARFT's agent-sequential GAE, for tests/anchors/test_marft.py.

Transcribed from jwliao-ai/MARFT @ 1beacdb5b8facc70638177ed22874cf59e52a6b9:
  - `marft/buffers/action_level_buffer.py::ActionBuffer.compute_gae_and_returns` (L36-53), with the buffer's arrays
    for one batch (`cur_batch_index` dropped) passed in: rewards [episode_length, n_threads, num_agents],
    action_level_v_values [episode_length + 1, n_threads, num_agents] (its last step is `next_value`), masks
    [episode_length + 1, n_threads, num_agents] (0 from the step after an episode ended). Loop order and arithmetic
    kept.
  - `marft/algorithms/appo_trainer.py::APPOTrainer.ppo_update` L92-96: the advantage normalization (exact zeros set to
    NaN, np.nanmean, np.nanstd, + 1e-8).
"""
from __future__ import annotations

import numpy as np


def compute_gae_and_returns(rewards, action_level_v_values, masks, gamma, gae_lambda):
    episode_length, _, num_agents = rewards.shape
    action_level_returns = np.zeros_like(rewards)
    action_level_advantages = np.zeros_like(rewards)
    gae = 0
    for step in reversed(range(episode_length)):
        for agent in reversed(range(num_agents)):
            if agent == num_agents - 1:
                delta = rewards[step, :, agent] \
                    + gamma * action_level_v_values[step + 1, :, 0] * masks[step + 1, :, 0] \
                    - action_level_v_values[step, :, agent]
                gae = delta + gamma * gae_lambda * masks[step + 1, :, 0] * gae
            else:
                delta = rewards[step, :, agent] \
                    + gamma * action_level_v_values[step, :, agent + 1] * masks[step, :, agent + 1] \
                    - action_level_v_values[step, :, agent]
                gae = delta + gamma * gae_lambda * masks[step, :, agent + 1] * gae
            action_level_returns[step, :, agent] = action_level_v_values[step, :, agent] + gae
            action_level_advantages[step, :, agent] = gae
    return action_level_advantages, action_level_returns


def normalize_advantages(advantages):
    advantages_copy = advantages.copy()
    advantages_copy[advantages_copy == 0.0] = np.nan
    mean_advantages = np.nanmean(advantages_copy)
    std_advantages = np.nanstd(advantages_copy)
    return (advantages - mean_advantages) / (std_advantages + 1e-8)
