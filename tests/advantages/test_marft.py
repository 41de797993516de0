"""MARFT: GAE along each episode's actions in order of play (step, then agent id) with one shared critic; the card's
tests (one agent = gae, reward-to-go along the sequence, bootstrap targets set by the order), the value targets, the
normalization and clear refusals."""
from __future__ import annotations

import pytest
import torch

import random

from tests.advantages.step_batches import episode_batch
from tests.rollout.scripted import ScriptedEngine
from workbench import registry
from workbench.advantages.gae import gae
from workbench.advantages.marft import agent_step_order, marft, marft_steps, marft_targets
from workbench.advantages.step_critic import step_gae, step_rewards, step_values, turn_spans
from workbench.envs.poker import KuhnTask
from workbench.models import char_tokenizer
from workbench.rollout import Sampling
from workbench.rollout.agents import agents
from workbench.tasks import Example

pytestmark = pytest.mark.covers("marft")
D = torch.float64


def kuhn_self_play(seed: int = 0, deals=("QK", "JQ", "KJ"), group_size: int = 4):
    """Kuhn poker self-play batches from the multi-agent rollout `agents` (a scripted engine betting at random), with
    random critic values on the policy tokens: the layout the lead's rollout gives."""
    rng = random.Random(seed)
    engine = ScriptedEngine(char_tokenizer(), lambda history: rng.choice("pb"))
    b = agents(engine, KuhnTask(), [Example(prompt="", answer=d, target="") for d in deals], group_size=group_size,
               sampling=Sampling(4))
    b.values = torch.randn(b.mask.shape, generator=torch.Generator().manual_seed(seed)) * b.mask
    return b


def per_step(b, A):
    """[B, S] each action's advantage (read at its first policy token)."""
    first, _, valid = turn_spans(b)
    return A.gather(1, first) * valid


def two_agent_game(rewards0, rewards1, values0=None, values1=None, agents=(0, 1)):
    """One episode: agent agents[0]'s row with turns rewards0, agent agents[1]'s with rewards1 (2 tokens per action,
    2 observation tokens between); values per action at its first token (0 elsewhere)."""
    b = episode_batch([[2] * len(rewards0), [2] * len(rewards1)], [list(rewards0), list(rewards1)])
    b.values = torch.zeros_like(b.mask)
    first, _, _ = turn_spans(b)
    for i, v in enumerate((values0, values1)):
        if v is not None:
            b.values[i, first[i, :len(v)]] = torch.tensor(v, dtype=D)
    b.agent, b.episode = torch.tensor(agents), torch.zeros(2, dtype=torch.long)
    return b


def test_one_agent_is_standard_gae_with_one_token_turns():
    """Rows of one agent, each turn one token: marft on turn rewards equals `gae` on the same rewards as token rewards
    (observation tokens between turns are skipped by both)."""
    rewards = [[0.5, 0.0, 1.0], [0.0, -1.0], [0.25, 0.5, 0.0, 2.0]]
    b = episode_batch([[1] * len(r) for r in rewards], rewards, seed=3)
    token = episode_batch([[1] * len(r) for r in rewards], rewards, seed=3)
    first, _, valid = turn_spans(token)
    token_rewards = torch.zeros_like(token.mask)
    for i, r in enumerate(rewards):
        token_rewards[i, first[i, :len(r)]] = torch.tensor(r, dtype=D)
    token.rewards, token.token_rewards = torch.zeros(3, dtype=D), token_rewards
    for gamma, lam in ((0.99, 0.95), (0.8, 0.3)):
        ours = marft(b, gamma=gamma, lam=lam, whiten=False)
        torch.testing.assert_close(ours, gae(token, gamma=gamma, lam=lam, whiten=False), rtol=0, atol=1e-12)
    # and with agent / episode ids of a one-seat game (the opponent a Python player): the same
    b.agent, b.episode = torch.zeros(3, dtype=torch.long), torch.arange(3)
    torch.testing.assert_close(marft(b, whiten=False), gae(token, gamma=0.99, lam=0.95, whiten=False), rtol=0,
                               atol=1e-12)


def test_one_agent_with_multi_token_turns_is_step_gae():
    b = episode_batch([[3, 1, 2], [2, 2]], [[0.0, 0.5, 1.0], [0.0, -1.0]])
    V, _, _, valid = step_values(b)
    A, _ = step_gae(step_rewards(b, V.shape[1]), V, valid, 0.99, 0.95)
    torch.testing.assert_close(per_step(b, marft(b, whiten=False)), A, rtol=0, atol=1e-12)


def test_gamma_lambda_one_and_zero_values_give_the_reward_to_go_along_the_agent_step_sequence():
    b = two_agent_game([1.0, 0.5, 2.0], [-1.0, 0.25])  # sequence: a0 s0, a1 s0, a0 s1, a1 s1, a0 s2
    sequence = [1.0, -1.0, 0.5, 0.25, 2.0]
    to_go = [sum(sequence[u:]) for u in range(5)]
    A = per_step(b, marft(b, gamma=1.0, lam=1.0, whiten=False))
    assert A[0, :3].tolist() == pytest.approx([to_go[0], to_go[2], to_go[4]])
    assert A[1, :2].tolist() == pytest.approx([to_go[1], to_go[3]])


def test_each_action_bootstraps_the_next_agent_in_the_step_or_the_first_agent_of_the_next_step():
    """lam = 0: A_u = r_u + gamma V_next(u) - V_u, next(t, 0) = (t, 1), next(t, 1) = (t + 1, 0), the last action 0."""
    r0, r1, v0, v1, g = [1.0, 0.5], [-1.0, 0.25], [0.3, -0.7], [0.9, 0.4], 0.9
    A = per_step(two_agent_game(r0, r1, v0, v1), marft(two_agent_game(r0, r1, v0, v1), gamma=g, lam=0.0,
                                                        whiten=False))
    assert A[0, :2].tolist() == pytest.approx([r0[0] + g * v1[0] - v0[0], r0[1] + g * v1[1] - v0[1]])
    assert A[1, :2].tolist() == pytest.approx([r1[0] + g * v0[1] - v1[0], r1[1] - v1[1]])
    # the same rows with the agent ids swapped: the other row moves first in every step
    swapped = two_agent_game(r0, r1, v0, v1, agents=(1, 0))
    A = per_step(swapped, marft(swapped, gamma=g, lam=0.0, whiten=False))
    assert A[1, :2].tolist() == pytest.approx([r1[0] + g * v0[0] - v1[0], r1[1] + g * v0[1] - v1[1]])
    assert A[0, :2].tolist() == pytest.approx([r0[0] + g * v1[1] - v0[0], r0[1] - v0[1]])


def test_a_step_is_discounted_by_gamma_to_the_number_of_agents():
    """Rewards only at the end, V = 0, lam = 1: an action k agent-steps before the reward gets gamma^k of it."""
    b = two_agent_game([0.0, 0.0], [0.0, 1.0])
    A = per_step(b, marft(b, gamma=0.5, lam=1.0, whiten=False))
    assert A[0, :2].tolist() == pytest.approx([0.5 ** 3, 0.5])
    assert A[1, :2].tolist() == pytest.approx([0.5 ** 2, 1.0])


def test_the_order_is_step_then_agent_within_each_episode():
    b = episode_batch([[1, 1], [1], [1, 1], [1, 1, 1]], [[0, 0], [0], [0, 0], [0, 0, 0]])
    b.agent, b.episode = torch.tensor([1, 0, 0, 1]), torch.tensor([5, 5, 2, 2])
    index, filled = agent_step_order(b.episode, b.agent, turn_spans(b)[2])
    S = turn_spans(b)[2].shape[1]
    as_pairs = [[(int(x) // S, int(x) % S) for x, f in zip(row, ok) if f] for row, ok in zip(index, filled)]
    assert as_pairs == [[(2, 0), (3, 0), (2, 1), (3, 1), (3, 2)], [(1, 0), (0, 0), (0, 1)]]


def test_on_kuhn_self_play_rows_the_sequence_is_the_order_of_play():
    """The rollout's rows: player 0 acts at steps 0 (and 1), player 1 at step 0; with lam = 0 and gamma = 1 every
    action bootstraps the next action of its game, the last one nothing."""
    b = kuhn_self_play()
    V, first, _, valid = step_values(b)
    A = per_step(b, marft(b, gamma=1.0, lam=0.0, whiten=False))
    r = step_rewards(b, V.shape[1])
    for e in b.episode.unique():
        i0, i1 = (int(torch.nonzero((b.episode == e) & (b.agent == k))) for k in (0, 1))
        order = [(i0, 0), (i1, 0)] + ([(i0, 1)] if bool(valid[i0, 1:].any()) else [])
        for u, (i, s) in enumerate(order):
            nxt = float(V[order[u + 1]]) if u + 1 < len(order) else 0.0
            assert float(A[i, s]) == pytest.approx(float(r[i, s]) + nxt - float(V[i, s]), abs=1e-6)
    assert b.mask.dtype == marft(b).dtype and bool(torch.isfinite(marft(b)).all())


def test_value_targets_are_the_returns_at_each_actions_first_token():
    b = two_agent_game([1.0, 0.5], [-1.0, 0.25], [0.3, -0.7], [0.9, 0.4])
    returns, value_mask = marft_targets(b, gamma=0.9, lam=0.7)
    A, R, first, valid = marft_steps(b, 0.9, 0.7)
    V = b.values.gather(1, first) * valid
    torch.testing.assert_close(R, (A + V) * valid)
    torch.testing.assert_close(returns.gather(1, first) * valid, R)
    assert torch.equal(torch.nonzero(value_mask), torch.nonzero(torch.zeros_like(b.mask).scatter(1, first, 1.0)
                                                                 * (b.mask > 0)))


def test_normalized_over_the_actions_with_the_population_std():
    b = two_agent_game([1.0, 0.5, 2.0], [-1.0, 0.25], [0.3, -0.7, 0.1], [0.9, 0.4])
    A = per_step(b, marft(b))
    valid = turn_spans(b)[2]
    assert abs(float(A[valid].mean())) < 1e-12 and float(A[valid].std(unbiased=False)) == pytest.approx(1.0, rel=1e-6)
    tokens = marft(b)
    assert bool((tokens[b.mask == 0] == 0).all())


def test_batches_whose_order_of_play_cannot_be_read_are_refused():
    b = two_agent_game([1.0], [0.0])
    b.episode = None
    with pytest.raises(ValueError, match="agent ids but no episode ids"):
        marft(b)
    b = two_agent_game([1.0], [0.0], agents=(1, 1))
    with pytest.raises(ValueError, match="episode 0 has several rows of the same agent"):
        marft(b)
    b.agent = None
    with pytest.raises(ValueError, match=r"several rows of the same agent \(the batch has no agent ids\)"):
        marft(b)


def test_registered_with_the_authors_defaults():
    e = registry.get("advantage", "marft")
    assert e.family == "multiagent" and e.defaults == {"gamma": 0.99, "lam": 0.95, "whiten": True}
    assert e.targets is marft_targets and "values" in e.reads and e.equation and e.fn.__doc__
    with pytest.raises(ValueError, match=r"lam \(the GAE trace decay\) must be in \[0, 1\]"):
        e.check(lam=2.0)
