"""POAD's token-level backup transcribed by hand from morning9393/ADRL @ 5ec1aa5450d150906455056c2a6718fcaeb2d12b
`mappo/utils/language_buffer.py` (used by tests/anchors/test_poad.py):

    LanguageBuffer.get_last_token_position   the last non-pad token of an action
    LanguageBuffer.batch_process_tppo        token-level GAE: branch "POAD" (intra-action delta = V_{j+1} - V_j,
                                             gae = delta + lambda gae; last token delta = r + gamma V(next step,
                                             token 0) mask - V, gae = delta + gamma lambda mask gae) and branch
                                             "NTPO" (gamma per token inside the action too)

The buffer's numpy arrays for one batch index and one agent: tppo_values [episode_length + 1, threads, tokens],
rewards [episode_length, threads], masks [episode_length + 1, threads] (0 after an episode's last step),
action_tokens [episode_length, threads, tokens] (pad_token_id after the action). Variable names and the order
of operations are the code's; the returned arrays are its tppo_advantages and tppo_returns.
"""
from __future__ import annotations

import numpy as np


def get_last_token_position(action_tokens, pad_token_id):
    pos = len(action_tokens) - 1
    while action_tokens[pos] == pad_token_id:
        pos -= 1
    return pos


def batch_process_tppo(tppo_values, rewards, masks, action_tokens, next_value, gamma, gae_lambda, algo="POAD",
                       pad_token_id=0):
    episode_length, n_rollout_threads, max_tokens = action_tokens.shape
    tppo_values = tppo_values.copy()
    tppo_values[-1, :, 0] = next_value
    tppo_returns = np.zeros((episode_length, n_rollout_threads, max_tokens))
    tppo_advantages = np.zeros_like(tppo_returns)
    for thread in range(n_rollout_threads):
        gae = 0
        next_last_token = 0
        for step in reversed(range(episode_length)):
            last_token = get_last_token_position(action_tokens[step, thread, :], pad_token_id)
            for token in reversed(range(last_token + 1)):
                rew = rewards[step, thread]
                v = tppo_values[step, thread, token]
                if token == last_token:
                    if algo == "ARCHER":
                        v_next = tppo_values[step + 1, thread, next_last_token]
                        mask_next = masks[step + 1, thread]
                        delta = rew + gamma * v_next * mask_next - v
                        gae = delta + gamma * gae_lambda * mask_next * gae
                    else:
                        v_next = tppo_values[step + 1, thread, 0]
                        mask_next = masks[step + 1, thread]
                        delta = rew + gamma * v_next * mask_next - v
                        gae = delta + gamma * gae_lambda * mask_next * gae
                else:
                    v_next = tppo_values[step, thread, token + 1]
                    if algo == "POAD":
                        delta = v_next - v
                        gae = delta + gae_lambda * gae
                    else:
                        # for NTPO
                        delta = gamma * v_next - v
                        gae = delta + gamma * gae_lambda * gae
                tppo_returns[step, thread, token] = gae + v
                tppo_advantages[step, thread, token] = gae
            next_last_token = last_token
    return tppo_advantages, tppo_returns
