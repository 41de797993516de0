"""Agreement with ProAct's code (tests/anchors/formulas_proact.py, GreatX3/ProAct @ b0046d0):

    Q_MC, V_MC       `get_return_for_state_action` / `get_value_for_state` on a random walk, the same random actions
                     drawn from the same seeded stream: equal estimates (ours with reference_bug: Q's extra step)
    MC-GRPO rewards  `group_normalization` and the same-action fallback, on given Q values and action strings
    MC-PPO           `compute_turn_level_advantages` (use_mc_critic) on one episode: turn advantages and returns

The code's estimates draw the game's randomness from `secrets.randbelow` (not reproducible); with a deterministic
environment only the random actions matter, and those both draw from the stream given.
"""
import random

import pytest
import torch

from tests.advantages.test_proact import Walk, turn_batch
from tests.helpers import D
from tests.anchors import formulas_proact as ref
from workbench.advantages.proact import mc_estimate, proact_mc_critic, proact_targets

pytestmark = pytest.mark.covers("proact-mc-critic")


def game(L, start):
    """The code's (reset, step) over a Walk, and the walk's actions."""
    state = {}

    def reset():
        state["env"] = Walk(L, start)

    def step(action):
        _, reward, done, _ = state["env"].step(action)
        return reward, done

    return reset, step, Walk(L, start).actions()


@pytest.mark.parametrize("seed", range(10))
def test_mc_estimates_match_the_code_on_the_same_random_actions(seed):
    rng = random.Random(seed)
    L, start = rng.randint(3, 7), None
    start = rng.randint(1, L - 1)
    n, gamma, max_steps = rng.randint(1, 20), rng.choice([0.9, 1.0]), rng.randint(1, 12)
    reset, step, actions = game(L, start)
    for first in (None, "L", "R"):
        ours_rng, their_rng = random.Random(seed + 100), random.Random(seed + 100)
        ours = mc_estimate(Walk(L, start), ours_rng, n=n, gamma=gamma, max_steps=max_steps, first=first,
                           reference_bug=first is not None)
        if first is None:
            theirs = ref.get_value_for_state(reset, step, their_rng.choice, actions, num_rollouts=n, gamma=gamma,
                                             max_steps=max_steps)
        else:
            theirs = ref.get_return_for_state_action(reset, step, their_rng.choice, actions, first, num_rollouts=n,
                                                     gamma=gamma, max_steps=max_steps)
        assert ours == pytest.approx(theirs, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("seed", range(20))
def test_mc_grpo_rewards_match_the_code(seed):
    rng = random.Random(seed)
    G = rng.randint(2, 8)
    moves = {a: rng.random() for a in ("left", "right", "up", "down")}
    same = rng.random() < 0.4
    actions = [rng.choice(list(moves)) for _ in range(G)] if not same else [rng.choice(list(moves))] * G
    q = [moves[a] for a in actions]
    theirs = ref.normalized_rewards(q, actions, list(moves.values()))
    batch = turn_batch([(0, [("s", a, 0.0)]) for a in actions])
    batch.turn_q = torch.tensor(q, dtype=D)[:, None]
    for row in batch.turn_info:
        row[0]["q_moves"] = moves
    ours = proact_mc_critic(batch, reference_bug=True)[:, 0]
    torch.testing.assert_close(ours, torch.tensor(theirs, dtype=D), rtol=1e-5, atol=1e-6)  # theirs: float32


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("lam", [0.0, 0.9])
def test_mc_ppo_turn_advantages_and_returns_match_the_code(seed, lam):
    g = torch.Generator().manual_seed(seed)
    n = int(torch.randint(1, 6, (1,), generator=g))
    rewards = torch.rand(n, generator=g, dtype=D).round(decimals=1)
    batch = turn_batch([(0, [(f"s{s}", "a", float(rewards[s])) for s in range(n)])], tokens_per_turn=2, obs_tokens=1)
    batch.values = torch.randn(batch.mask.shape, generator=g, dtype=D) * batch.mask
    batch.old_values = batch.values
    batch.turn_values = torch.rand(1, n, generator=g, dtype=D)
    first = [int(torch.nonzero((batch.turn[0] == s) & (batch.mask[0] > 0))[0]) for s in range(n)]
    v_phi = [float(batch.values[0, t]) for t in first]
    # the code's window: the episode's n turns, then a bootstrap row that the last turn's `terminated` cancels
    adv, ret = ref.compute_turn_level_advantages(v_phi + [0.0], rewards.tolist() + [0.0], [0] * (n - 1) + [1, 1],
                                                 batch.turn_values[0].tolist() + [0.0], 0.9, lam, True, 0.9, n)
    ours = proact_mc_critic(batch, mode="ppo", lam=lam, whiten=False)
    returns, value_mask = proact_targets(batch, mode="ppo", lam=lam)
    torch.testing.assert_close(ours[0, first], adv[:n])
    torch.testing.assert_close(returns[0, first], ret[:n])
    assert value_mask[0].sum() == n
