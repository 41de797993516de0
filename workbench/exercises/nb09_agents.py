"""The exercises of notebook 09_agents (multi-turn agents with tools): each answer is checked against the library's
own math."""
from __future__ import annotations

import torch

from workbench.batch import RolloutBatch
from workbench.exercises.answers import near


CALCULATOR_EXERCISE = ("37*48+19=", "1795", ("[37*48]", "[1776+19]", "A:1795"))  # prompt, answer, expert actions


def calculator_token_counts(prompt: str = CALCULATOR_EXERCISE[0], answer: str = CALCULATOR_EXERCISE[1],
                            actions=CALCULATOR_EXERCISE[2]) -> tuple[int, int]:
    """(trained, observation) token counts of a calculator episode with the character tokenizer (one token per
    character), encoded by the rollout's own `encode_expert`: the policy's actions are mask 1, the tool's answers
    mask 0."""
    from workbench.envs.calculator import CalculatorTask
    from workbench.models import char_tokenizer
    from workbench.rollout.turns import encode_expert
    from workbench.tasks.base import Example

    example = Example(prompt=prompt, answer=answer, target=f"A:{answer}")
    _, episode = encode_expert(char_tokenizer(), CalculatorTask().make_env(), example, list(actions))
    trained = int(sum(episode.mask))
    return trained, len(episode.mask) - trained


def check_trained_tokens(answer) -> str:
    """Exercise: how many tokens of the calculator episode does the update train on?"""
    trained, observed = calculator_token_counts()
    given = None if answer is None else int(answer)
    if given == trained:
        return "correct"
    if given == trained + observed:
        hint = "you counted the tool's answers too: observation tokens are mask 0 (the environment wrote them)"
    elif given == trained - 1:
        hint = "the final answer ends with EOS, which the policy sampled: it is trained too"
    elif given is not None and given > trained and given < trained + observed:
        hint = ("a tool call ends at its stop string ']' (kept in the action): no EOS follows it; only the final "
                "answer, which is not a tool call, ends with EOS")
    else:
        hint = "count the characters of the three actions (one token each) and the tokens that end them"
    raise AssertionError(f"not quite ({answer}): {hint}")


# A gridworld group of four episodes (goal at 1,2; shortest path 3 moves, budget 5): the state each step acted
# from, and the outcome reward (paid on the goal step, the last one).
AGENT_GROUP_STATES = (
    ((0, 0), (0, 1), (1, 1)),                   # R D R: reaches the goal in 3 moves
    ((0, 0), (1, 0), (1, 1), (0, 1), (0, 2)),  # D R U R D: reaches it in 5
    ((0, 0), (0, 0), (0, 1), (0, 2), (0, 2)),  # U (bumps) R R U U: budget spent
    ((0, 0), (1, 0), (2, 0), (3, 0), (3, 0)),  # D D D D L: budget spent
)
AGENT_GROUP_REWARDS = (1.0, 1.0, 0.0, 0.0)


def agent_group_batch(states=AGENT_GROUP_STATES, rewards=AGENT_GROUP_REWARDS, obs_tokens: int = 2) -> RolloutBatch:
    """The group above as a multi-turn RolloutBatch: per step one action token (mask 1) and `obs_tokens`
    observation tokens (mask 0, none after the last action), turn ids, turn_rewards (the reward on the last
    step) and turn_info states, as the rollout `turns` lays them out."""
    B = len(states)
    T = max(len(s) * (1 + obs_tokens) - obs_tokens for s in states)
    S = max(len(s) for s in states)
    mask = torch.zeros(B, T, dtype=torch.float64)
    turn = torch.full((B, T), -1, dtype=torch.long)
    turn_rewards = torch.zeros(B, S, dtype=torch.float64)
    for i, row in enumerate(states):
        for s in range(len(row)):
            t = s * (1 + obs_tokens)
            mask[i, t] = 1.0
            turn[i, t:t + (1 + obs_tokens if s < len(row) - 1 else 1)] = s
        turn_rewards[i, len(row) - 1] = rewards[i]
    return RolloutBatch(response_ids=torch.zeros(B, T, dtype=torch.long), mask=mask,
                        group=torch.zeros(B, dtype=torch.long), rewards=torch.tensor(rewards, dtype=torch.float64),
                        turn=turn, turn_rewards=turn_rewards,
                        turn_info=[[{"state": st, "tool_error": None} for st in row] for row in states])


def gigpo_step_advantage(row: int, step: int, omega: float = 1.0) -> float:
    """GiGPO's advantage (registered `gigpo`, its defaults: gamma 0.95, mean_std_norm) on the action token of
    `step` of episode `row` in the group above."""
    from workbench import registry

    batch = agent_group_batch()
    adv = registry.get("advantage", "gigpo").fn(batch, omega=omega)
    t = int(torch.nonzero((batch.turn[row] == step) & (batch.mask[row] > 0))[0])
    return float(adv[row, t])


def anchor_step_advantage(row: int = 0, step: int = 0) -> float:
    """The step-level term A_S of (row, step): GiGPO's advantage minus its omega = 0 value (the episode term)."""
    return gigpo_step_advantage(row, step, 1.0) - gigpo_step_advantage(row, step, 0.0)


def check_anchor_step_advantage(answer, row: int = 0, step: int = 0, gamma: float = 0.95) -> str:
    """Exercise: the step-level advantage A_S of episode `row`'s step `step` (default: the start state)."""
    expected = anchor_step_advantage(row, step)
    state = AGENT_GROUP_STATES[row][step]
    members = [(i, s) for i, r in enumerate(AGENT_GROUP_STATES) for s, st in enumerate(r) if st == state]
    returns = [gamma ** (len(AGENT_GROUP_STATES[i]) - 1 - s) * AGENT_GROUP_REWARDS[i] for i, s in members]
    if near(answer, expected):
        return "correct"
    g = torch.tensor(returns, dtype=torch.float64)
    own = returns[members.index((row, step))]
    population = (own - g.mean()) / g.std(unbiased=False)
    if near(answer, float(population)):
        hint = f"use the Bessel (n - 1) std, as GiGPO does: {g.std():.4f}, not {g.std(unbiased=False):.4f}"
    elif near(answer, float(own - g.mean())):
        hint = "that is G minus the anchor group's mean; the default mode also divides by the group's std"
    else:
        hint = (f"state {state} is acted from by {len(members)} steps {members} (row, step); the step return is "
                f"G = gamma^(n_i - 1 - s) R_i with gamma = {gamma} (the reward comes on the last step): "
                "z-score G inside that anchor group")
    raise AssertionError(f"not quite ({answer}): {hint}")


def check_unshared_step_advantage(answer, row: int = 3, step: int = 2) -> str:
    """Exercise: GiGPO's advantage (omega = 1) on a step whose state no other step of the group acts from."""
    expected = gigpo_step_advantage(row, step)
    if near(answer, expected):
        return "correct"
    if near(answer, 0.0, 1e-9):
        hint = ("the step-level term is 0 for an anchor group of one step, but the episode term A_E is still "
                "there: the z-score of the episode's return in its group")
    else:
        hint = ("no other step of the group acts from this state, so A_S = 0 and the advantage is the episode "
                "term alone: (R_i - mean R) / std R over the group's returns (Bessel std)")
    raise AssertionError(f"not quite ({answer}): {hint}")


def check_two_step_anchor(answer, row: int = 0, step: int = 2) -> str:
    """Exercise: A_S of a step whose anchor group has exactly two members with different returns."""
    expected = anchor_step_advantage(row, step)
    if near(answer, expected):
        return "correct"
    if near(answer, -expected):
        hint = "right size, wrong sign: which of the two steps has the larger discounted return?"
    else:
        hint = ("two returns a > b have mean (a + b) / 2 and Bessel std |a - b| / sqrt(2): the z-score does not "
                "depend on the gap")
    raise AssertionError(f"not quite ({answer}): {hint}")
