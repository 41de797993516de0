"""POAD: token-level GAE with no discount and no reward inside an action, gamma between actions."""
import pytest
import torch

from tests.advantages.step_batches import episode_batch
from workbench import ops, registry
from workbench.advantages.gae import gae_and_returns
from workbench.advantages.poad import action_discounts, action_end_rewards, poad, poad_gae, poad_targets
from workbench.advantages.step_critic import turn_spans
from workbench.advantages.vl_dac import vl_dac_steps

pytestmark = pytest.mark.covers("poad")

ACTIONS = [[3, 1, 2], [2, 2], [1, 4, 1, 2]]
REWARDS = [[0.0, 0.5, 1.0], [0.0, -1.0], [0.25, 0.0, 0.0, 2.0]]


def test_registered_with_adrl_defaults_a_token_level_critic_and_needs():
    e = registry.get("advantage", "poad")
    assert e.defaults == {"gamma": 0.95, "lam": 0.95, "whiten": True}
    assert e.needs == ("multi_turn",) and "values" in e.reads and e.confidence == "abstract-only"
    b = episode_batch(ACTIONS, REWARDS)
    returns, vmask = poad_targets(b)
    assert torch.equal(vmask, b.mask)  # every policy token has a target
    assert torch.allclose(returns, poad_gae(b, 0.95, 0.95)[1])


@pytest.mark.parametrize("gamma, lam", [(0.95, 0.95), (0.8, 0.0), (1.0, 1.0)])
def test_single_token_actions_are_per_step_gae(gamma, lam):
    actions = [[1, 1, 1], [1, 1], [1, 1, 1, 1]]
    b = episode_batch(actions, REWARDS)
    A = poad(b, gamma=gamma, lam=lam, whiten=False)
    steps, _, first, valid = vl_dac_steps(b, gamma, lam)
    assert torch.allclose(A.gather(1, first) * valid, steps)
    flat, _ = gae_and_returns(action_end_rewards(b), b.values, b.mask, gamma, lam)  # plain gae: gamma per token
    assert torch.allclose(A, flat)


def test_intra_action_deltas_telescope_to_the_action_level_td_error():
    b = episode_batch(ACTIONS, REWARDS)
    gamma = 0.9
    deltas = poad(b, gamma=gamma, lam=0.0, whiten=False)  # lam = 0: A_j = delta_j
    first, _, valid = turn_spans(b)
    V = b.values.gather(1, first) * valid
    for i, lengths in enumerate(ACTIONS):
        for s in range(len(lengths)):
            tokens = (b.turn[i] == s) & (b.mask[i] > 0)
            v_next = float(V[i, s + 1]) if s + 1 < len(lengths) else 0.0
            td = REWARDS[i][s] + gamma * v_next - float(V[i, s])
            assert float(deltas[i][tokens].sum()) == pytest.approx(td)
            inside = deltas[i][tokens][:-1]            # V_{j+1} - V_j: no reward, no discount
            vals = b.values[i][tokens]
            assert torch.allclose(inside, vals[1:] - vals[:-1])


def test_no_reward_inside_an_action_and_gamma_only_at_its_last_token():
    b = episode_batch(ACTIONS, REWARDS)
    _, last, valid = turn_spans(b)
    r = action_end_rewards(b)
    at_last = torch.zeros_like(b.mask, dtype=torch.bool).scatter(1, last, valid)
    assert bool((r[~at_last] == 0).all()) and torch.allclose(r.sum(-1), b.rewards)
    g = action_discounts(b, 0.7)
    assert bool((g[at_last] == 0.7).all()) and bool((g[~at_last] == 1.0).all())


def test_observation_tokens_are_skipped_as_in_gae():
    near = episode_batch(ACTIONS, REWARDS, obs=1)
    far = episode_batch(ACTIONS, REWARDS, obs=4)
    far.values = torch.zeros_like(far.mask)
    far.values[far.mask > 0] = near.values[near.mask > 0]
    a_near, a_far = poad(near, whiten=False), poad(far, whiten=False)
    assert torch.allclose(a_near[near.mask > 0], a_far[far.mask > 0])


def test_whitened_over_policy_tokens_as_gae():
    b = episode_batch(ACTIONS, REWARDS)
    raw = poad(b, whiten=False)
    assert torch.allclose(poad(b), ops.masked_whiten(raw, b.mask))
