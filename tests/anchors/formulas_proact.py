"""ProAct's Monte Carlo critic transcribed from GreatX3/ProAct @ b0046d0d17d98637cbe7918cefa400ed896d96b0 (used by
tests/anchors/test_proact.py):

    envs/twentyFortyEightVariantEnv.py        TwentyFortyEightVariantEnv.get_return_for_state_action (Q_MC),
                                              get_value_for_state (V_MC)
    areal/workflow/step_grpo_workflow.py      group_normalization; StepGRPOWorkflow.arun_one_state_groupsample_2048,
                                              the `use_abs_adv_only_for_group_with_same_reward` block (MC-GRPO's
                                              rewards, with the same-action fallback)
    areal/engine/ppo/actor.py                 PPOActor.compute_turn_level_advantages, the `use_mc_critic` turn loop
                                              and returns (MC-PPO)

The 2048 game is replaced by callables: `reset()` puts the game back in the state being valued (the code's
`self.reset(grid=copy.deepcopy(state), seed=secrets.randbelow(2**31))`), `step(action) -> (reward, done)`, and
`choice(actions)` draws the random action (the code's `random.choice(["left", "right", "up", "down"])`). The
"null"/"illegal" keying of the first action and the per-env cache are dropped. The turn loop takes each turn's
critic value, reward, terminated flag and MC value as lists (the code reads them off [turns, seq] tensors at the
turn's last token); reward scaling/clipping/normalization and the KL rewards are left out. Names and the order of
operations are the code's.
"""
from __future__ import annotations

import torch


def get_return_for_state_action(reset, step, choice, actions, action, num_rollouts=1000, gamma=0.9, max_steps=1000):
    value_list = []
    for _ in range(num_rollouts):
        reset()
        first_reward, done = step(action)
        value = first_reward
        step_idx = 1
        while not done and step_idx <= max_steps:
            reward, done = step(choice(actions))
            value += gamma ** step_idx * reward
            step_idx += 1
        value_list.append(value)
    result = sum(value_list) / len(value_list)
    return result


def get_value_for_state(reset, step, choice, actions, num_rollouts=1000, gamma=0.9, max_steps=1000):
    value_list = []
    for _ in range(num_rollouts):
        reset()
        step_idx = 0
        value = 0
        while step_idx < max_steps:
            reward, done = step(choice(actions))
            value += gamma ** step_idx * reward
            step_idx += 1
            if done:
                break
        value_list.append(value)
    result = sum(value_list) / len(value_list)
    return result


def group_normalization(reward_list):
    reward_tensor = torch.tensor(reward_list)
    return ((reward_tensor - reward_tensor.mean()) / (reward_tensor.std() + 1e-5)).tolist()


def normalized_rewards(reward_list, action_str_list, value_list_for_all_actions):
    """The MC-GRPO block of arun_one_state_groupsample_2048: each response's reward after normalization."""
    value_list_for_all_actions = torch.tensor(value_list_for_all_actions)
    value_mean = value_list_for_all_actions.mean().item()
    value_std = value_list_for_all_actions.std().item()

    group_with_same_reward = 0
    if len(set(action_str_list)) == 1:
        group_with_same_reward = 1

    normalize_reward_list = []
    if group_with_same_reward == 1:
        reward = (reward_list[0] - value_mean) / value_std
        for i in range(len(reward_list)):
            normalize_reward_list.append(reward)
    else:
        reward_list_normalize = group_normalization(reward_list)
        for i in range(len(reward_list)):
            normalize_reward_list.append(reward_list_normalize[i])
    return normalize_reward_list


def compute_turn_level_advantages(values, reward_score, terminated, mc_values, discount, gae_lambda,
                                  use_mc_critic, mc_value_weight, train_turns_per_gpu):
    """The turn loop: `values`, `reward_score`, `terminated`, `mc_values` have train_turns_per_gpu + 1 entries (the
    last turn only bootstraps). Returns (turn_advantages, turn_returns) over all of them."""
    values = torch.as_tensor(values, dtype=torch.float64)
    reward_score = torch.as_tensor(reward_score, dtype=torch.float64)
    terminated = torch.as_tensor(terminated, dtype=torch.float64)
    mc_values = torch.as_tensor(mc_values, dtype=torch.float64)
    turn_advantages = torch.zeros(train_turns_per_gpu + 1, dtype=torch.float64)
    lastgaelam = 0.0

    for turn_idx in reversed(range(train_turns_per_gpu)):
        turn_reward = reward_score[turn_idx]
        if not use_mc_critic:
            next_turn_value = values[turn_idx + 1]
        else:
            next_turn_value = (1 - mc_value_weight) * values[turn_idx + 1] + mc_value_weight * mc_values[turn_idx + 1]

        if not use_mc_critic:
            delta = turn_reward + discount * (1 - terminated[turn_idx]) * next_turn_value - values[turn_idx]
        else:
            delta = turn_reward + discount * (1 - terminated[turn_idx]) * next_turn_value - (
                (1 - mc_value_weight) * values[turn_idx] + mc_value_weight * mc_values[turn_idx])

        turn_advantages[turn_idx] = delta + discount * gae_lambda * (1 - terminated[turn_idx]) * lastgaelam
        lastgaelam = turn_advantages[turn_idx]

    if not use_mc_critic:
        turn_returns = turn_advantages + values
    else:
        turn_returns = turn_advantages + ((1 - mc_value_weight) * values + mc_value_weight * mc_values)
    return turn_advantages, turn_returns
