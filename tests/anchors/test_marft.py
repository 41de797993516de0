"""Agreement with jwliao-ai/MARFT @ 1beacdb `ActionBuffer.compute_gae_and_returns` and the APPO advantage
normalization (transcribed in formulas_marft.py): episodes are the buffer's rollout threads, the agents' rows our
(episode, agent) rows, the buffer's (step, agent) grid our rows' turns; an episode that ends before an agent's turn
in its last step has that agent's mask 0 there (the reference's way to end the sequence)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.advantages.step_batches import episode_batch
from tests.anchors import formulas_marft as ref
from tests.helpers import assert_agree
from workbench.advantages.marft import marft, marft_targets
from workbench.advantages.step_critic import turn_spans

pytestmark = pytest.mark.covers("marft")
D = torch.float64


def grid_case(seed: int, episodes: int = 4, agents: int = 3, L: int = 3):
    """(our batch, reference rewards / values / masks [L(+1), episodes, agents]): episode e takes n_e <= L steps; in its
    last step only its first m_e agents act."""
    g = np.random.default_rng(seed)
    steps = g.integers(1, L + 1, episodes)
    last_agents = g.integers(1, agents + 1, episodes)
    rewards = g.normal(size=(L, episodes, agents))
    values = g.normal(size=(L + 1, episodes, agents))
    masks = np.zeros((L + 1, episodes, agents))
    actions, step_rewards, agent_ids, episode_ids, row_of = [], [], [], [], {}
    for e in range(episodes):
        for k in range(agents):
            n = int(steps[e]) - (0 if k < last_agents[e] else 1)  # agent k's number of actions
            if n == 0:
                continue
            masks[:n, e, k] = 1.0
            row_of[(e, k)] = len(actions)
            actions.append([int(x) for x in g.integers(1, 4, n)])
            step_rewards.append(list(rewards[:n, e, k]))
            agent_ids.append(k), episode_ids.append(e)
    b = episode_batch(actions, step_rewards, obs=2, seed=seed)
    b.agent, b.episode = torch.tensor(agent_ids), torch.tensor(episode_ids)
    first, _, valid = turn_spans(b)
    for (e, k), i in row_of.items():  # the critic's value of each action at its first token
        n = int(valid[i].sum())
        b.values[i, first[i, :n]] = torch.tensor(values[:n, e, k], dtype=D)
    return b, rewards, values, masks, row_of


def read_rows(x, b, row_of):
    """[B, S] of the reference's grid x [L, episodes, agents] at our (row, step)."""
    out = torch.zeros(b.size, turn_spans(b)[2].shape[1], dtype=D)
    for (e, k), i in row_of.items():
        n = int(turn_spans(b)[2][i].sum())
        out[i, :n] = torch.tensor(x[:n, e, k], dtype=D)
    return out


def per_step(b, A):
    """[B, S] A at each action's first policy token."""
    first, _, valid = turn_spans(b)
    return A.gather(1, first) * valid


@pytest.mark.parametrize("gamma, lam", [(0.99, 0.95), (0.9, 0.5), (1.0, 1.0)])
@pytest.mark.parametrize("seed", range(5))
def test_advantages_and_returns_match_the_reference(seed, gamma, lam):
    b, rewards, values, masks, row_of = grid_case(seed)
    adv, ret = ref.compute_gae_and_returns(rewards, values, masks, gamma, lam)
    assert_agree(per_step(b, marft(b, gamma=gamma, lam=lam, whiten=False)), read_rows(adv, b, row_of))
    returns, value_mask = marft_targets(b, gamma=gamma, lam=lam)
    assert_agree(per_step(b, returns), read_rows(ret, b, row_of))
    assert int(value_mask.sum()) == int(turn_spans(b)[2].sum())


@pytest.mark.parametrize("seed", range(3))
def test_the_normalized_advantages_match_the_appo_update(seed):
    b, rewards, values, masks, row_of = grid_case(seed)
    adv, _ = ref.compute_gae_and_returns(rewards, values, masks, 0.99, 0.95)
    valid = masks[:-1] > 0
    theirs = np.zeros_like(adv)
    theirs[valid] = ref.normalize_advantages(adv[valid])  # the taken actions: the reference's filled buffer slots
    assert_agree(per_step(b, marft(b)), read_rows(theirs, b, row_of))
