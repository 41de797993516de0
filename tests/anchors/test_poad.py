"""Agreement with POAD's buffer (tests/anchors/formulas_poad.py, morning9393/ADRL @ 5ec1aa5):

    "POAD" branch   `poad` (unwhitened advantages, critic returns) on episodes as rows == batch_process_tppo on the
                    same episodes laid end to end in thread streams (masks 0 after each episode's last step)
    "NTPO" branch   naive token-level PPO (gamma per token) == `gae_and_returns` on the same action-end rewards
"""
import random

import numpy as np
import pytest
import torch

from tests.advantages.step_batches import D, episode_batch
from tests.anchors import formulas_poad as ref
from workbench.advantages.gae import gae_and_returns
from workbench.advantages.poad import action_end_rewards, poad_gae

pytestmark = pytest.mark.covers("poad")


def random_episodes(rng: random.Random, n: int, max_tokens: int):
    actions = [[rng.randint(1, max_tokens) for _ in range(rng.randint(1, 4))] for _ in range(n)]
    rewards = [[rng.choice([0.0, 0.0, 0.5, 1.0, -1.0]) for _ in a] for a in actions]
    return actions, rewards


def buffer(actions, rewards, values, threads: int, max_tokens: int):
    """Episodes dealt round-robin to thread streams of equal length (padded with one-token dummy episodes), as the
    buffer's arrays; `where[(row, step)] = (step index, thread)`."""
    streams = [[] for _ in range(threads)]
    for k in range(len(actions)):
        streams[k % threads].append(k)
    L = max(sum(len(actions[k]) for k in s) for s in streams)
    tv = np.zeros((L + 1, threads, max_tokens))
    rew, masks = np.zeros((L, threads)), np.ones((L + 1, threads))
    tokens = np.zeros((L, threads, max_tokens), dtype=np.int64)  # pad id 0
    where = {}
    for p, stream in enumerate(streams):
        t = 0
        for k in stream:
            for s, n in enumerate(actions[k]):
                tv[t, p, :n] = values[k][s]
                rew[t, p] = rewards[k][s]
                tokens[t, p, :n] = 7
                where[(k, s)] = (t, p)
                t += 1
            masks[t, p] = 0.0
        while t < L:
            tokens[t, p, 0] = 7
            masks[t + 1, p] = 0.0
            t += 1
    return tv, rew, masks, tokens, where


@pytest.mark.parametrize("seed", range(8))
def test_poad_branch_matches_batch_process_tppo(seed):
    rng = random.Random(seed)
    K = 4
    actions, rewards = random_episodes(rng, rng.randint(2, 6), K)
    values = [[[rng.gauss(0, 1) for _ in range(n)] for n in a] for a in actions]
    b = episode_batch(actions, rewards)
    V = torch.zeros_like(b.mask)
    for i, row in enumerate(values):
        for s, vs in enumerate(row):
            V[i][(b.turn[i] == s) & (b.mask[i] > 0)] = torch.tensor(vs, dtype=D)
    b.values = V
    gamma, lam = rng.choice([0.95, 0.9, 1.0]), rng.choice([0.95, 0.5, 1.0])
    adv, ret = poad_gae(b, gamma, lam)
    tv, rew, masks, tokens, where = buffer(actions, rewards, values, threads=rng.randint(1, 3), max_tokens=K)
    t_adv, t_ret = ref.batch_process_tppo(tv, rew, masks, tokens, next_value=rng.gauss(0, 1), gamma=gamma,
                                          gae_lambda=lam, algo="POAD")
    for (k, s), (t, p) in where.items():
        n = actions[k][s]
        tok = (b.turn[k] == s) & (b.mask[k] > 0)
        np.testing.assert_allclose(adv[k][tok].numpy(), t_adv[t, p, :n], rtol=0, atol=1e-12)
        np.testing.assert_allclose(ret[k][tok].numpy(), t_ret[t, p, :n], rtol=0, atol=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_ntpo_branch_is_plain_token_gae_on_action_end_rewards(seed):
    rng = random.Random(50 + seed)
    K = 3
    actions, rewards = random_episodes(rng, 4, K)
    values = [[[rng.gauss(0, 1) for _ in range(n)] for n in a] for a in actions]
    b = episode_batch(actions, rewards)
    V = torch.zeros_like(b.mask)
    for i, row in enumerate(values):
        for s, vs in enumerate(row):
            V[i][(b.turn[i] == s) & (b.mask[i] > 0)] = torch.tensor(vs, dtype=D)
    adv, _ = gae_and_returns(action_end_rewards(b), V, b.mask, 0.9, 0.8)
    tv, rew, masks, tokens, where = buffer(actions, rewards, values, threads=2, max_tokens=K)
    t_adv, _ = ref.batch_process_tppo(tv, rew, masks, tokens, next_value=0.0, gamma=0.9, gae_lambda=0.8, algo="NTPO")
    for (k, s), (t, p) in where.items():
        tok = (b.turn[k] == s) & (b.mask[k] > 0)
        np.testing.assert_allclose(adv[k][tok].numpy(), t_adv[t, p, :actions[k][s]], rtol=0, atol=1e-12)
