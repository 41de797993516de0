"""SPEAR's tool-call reward transcribed from its repository (used by tests/anchors/test_spear.py).

Source: TencentYoutuResearch/SPEAR at commit 7e8431513165640b4b1f78d09ebaae8807ee4f85 (verl recipe and verl-agent,
neither importable here: both need a verl fork and ray):

    verl/recipe/spear/reward.py
        default_compute_score_enforce_toolcall_posneg_decay          (the Qwen2.5 scripts' reward)
        default_compute_score_enforce_toolcall_posneg_decay_qwen3    (the Qwen3 scripts' reward)
    verl-agent/agent_system/reward_manager/episode.py
        EpisodeRewardManager.__call__                                 (the score of one episode)

Variable names and the order of operations are the code's. The task score `default_compute_score(...)` (math
verifiers) is passed in as `res`, a float; the dict-result branches and the print/debug lines are dropped.
"""
from __future__ import annotations

import numpy as np


def _toolcall_count_reward(tools, messages):
    res_toolcall = 0.0
    if tools is not None:
        for message in messages:
            if type(message) is dict:
                if message["role"] == "assistant" and ("tool_calls" in message and message["tool_calls"] is not None):
                    res_toolcall += 0.1
            else:
                if message.role == "assistant" and (message.tool_calls is not None):
                    res_toolcall += 0.1
    return res_toolcall


def _toolcall_ratio(global_steps, use_toolcall_reward, max_toolcall_steps):
    assert global_steps >= 0
    if use_toolcall_reward == "none":
        res_toolcall_ratio = 0.0
    elif use_toolcall_reward == "constant":
        res_toolcall_ratio = 1
    elif use_toolcall_reward == "cosine":
        res_toolcall_ratio = 1
        if global_steps <= max_toolcall_steps:
            res_toolcall_ratio *= (np.cos((global_steps / max_toolcall_steps) * np.pi) + 1) / 2
        else:
            res_toolcall_ratio = 0
    else:
        raise NotImplementedError("use_toolcall_reward must be one of ['none', 'constant', 'cosine']")
    return res_toolcall_ratio


def default_compute_score_enforce_toolcall_posneg_decay(res, tools=None, messages=[], global_steps=-1,
                                                        use_toolcall_reward="none", max_toolcall_steps=200):
    """reward.py, with `res = default_compute_score(...)` given."""
    res_toolcall = _toolcall_count_reward(tools, messages)
    res_toolcall = min(res_toolcall, 1.0)  # number of toolcall maximum 1.0 reward
    res_toolcall_ratio = _toolcall_ratio(global_steps, use_toolcall_reward, max_toolcall_steps)
    # plus the toolcall turn
    res += float(res_toolcall) * res_toolcall_ratio
    return res


def default_compute_score_enforce_toolcall_posneg_decay_qwen3(res, tools=None, messages=[], global_steps=-1,
                                                              use_toolcall_reward="none", max_toolcall_steps=200):
    """reward.py (Qwen3), with `res = default_compute_score(...)` given."""
    res_toolcall = _toolcall_count_reward(tools, messages)
    res_toolcall = min(res_toolcall, 1.0)  # number of toolcall maximum 1.0 reward
    res_toolcall_ratio = _toolcall_ratio(global_steps, use_toolcall_reward, max_toolcall_steps)
    res_toolcall_ratio = max(res_toolcall_ratio, 0)
    # plus the toolcall turn
    if res <= 0:
        res += float(res_toolcall) * res_toolcall_ratio
    else:
        res += float(res_toolcall > 0) * res_toolcall_ratio
    return res


def episode_score(episode_rewards, episode_lengths, use_toolcall_reward, max_toolcall_steps, global_steps,
                  normalize_by_length=False):
    """episode.py `EpisodeRewardManager.__call__`: the score put on an episode's last response token."""
    if normalize_by_length:
        score = episode_rewards / episode_lengths
    else:
        score = episode_rewards
    if use_toolcall_reward == "none":
        score += 0
    elif use_toolcall_reward == "constant":
        score_toolcall = min(1.0, episode_lengths * 0.1)
        score += score_toolcall * 1
    else:
        assert global_steps >= 0
        if global_steps <= max_toolcall_steps:
            score_toolcall = min(1.0, episode_lengths * 0.1)
            score_toolcall *= (np.cos((global_steps / max_toolcall_steps) * np.pi) + 1) / 2
            score_toolcall = max(0, score_toolcall)
            score += score_toolcall
    return score
