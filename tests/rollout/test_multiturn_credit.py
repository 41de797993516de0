"""Credit assignment on multi-turn batches: observation tokens (mask 0 inside a response) must neither cut
nor leak into returns and GAE (verl #2337: GAE bootstraps across observation tokens; verl #6376 / #7278:
REINFORCE++'s reward-to-go must not reset at them; slime #1372: token rewards on them must not leak), and
GiGPO reads its anchor states and step rewards from the rollout's batch."""
import random
import warnings

import pytest
import torch

from tests.rollout.scripted import ScriptedEngine, gridworld_policy
from workbench.advantages.base import token_rewards
from workbench.advantages.gae import gae, gae_and_returns, gae_returns
from workbench.advantages.gigpo import gigpo
from workbench.advantages.group import grpo
from workbench.advantages.reinforce import discounted_returns, reinforce_plus_plus
from workbench.batch import RolloutBatch
from workbench.models import char_tokenizer
from workbench.rollout import Sampling, turns
from workbench.tasks import get_task

D = torch.float64


@pytest.mark.covers("gae")
def test_gae_bootstraps_from_the_next_action_token_across_an_observation():
    """mask: action(2) obs(2) action(2); the value after the first action's last token is V at the first token
    of the next action, not at an observation token (whose values are junk here)."""
    mask = torch.tensor([[1, 1, 0, 0, 1, 1]], dtype=D)
    values = torch.tensor([[0.1, 0.2, 50.0, -70.0, 0.3, 0.4]], dtype=D)
    rewards = torch.tensor([[0, 0, 0, 0, 0, 1.0]], dtype=D)
    gamma, lam = 0.9, 0.8
    adv, ret = gae_and_returns(rewards, values, mask, gamma, lam)
    a5 = 1.0 - 0.4
    a4 = gamma * 0.4 - 0.3 + gamma * lam * a5
    a1 = gamma * 0.3 - 0.2 + gamma * lam * a4  # next value V_4, next advantage A_4
    a0 = gamma * 0.2 - 0.1 + gamma * lam * a1
    expected = torch.tensor([[a0, a1, 0, 0, a4, a5]], dtype=D)
    torch.testing.assert_close(adv, expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(ret, (expected + values) * mask, rtol=0, atol=1e-12)


@pytest.mark.covers("reinforce_plus_plus")
def test_reward_to_go_carries_through_observation_tokens():
    # verl #6376's example: an earlier action token still gets the discounted later reward
    returns = discounted_returns(torch.tensor([[0.0, 0.0, 1.0]], dtype=D), torch.tensor([[1.0, 0.0, 1.0]], dtype=D),
                                 0.5)
    assert returns.tolist() == [[0.5, 0.0, 1.0]]


def multi_turn_batch(seed: int):
    """Rows of actions and observations (turn ids, mask holes), padding after, with values and KL-like token
    rewards set everywhere (junk on observation tokens), and the same rows with the observations cut out."""
    g = torch.Generator().manual_seed(seed)
    layouts = [[(3, 2), (2, 3), (4, 0)], [(2, 1), (1, 0)], [(5, 0)], [(1, 4), (2, 2), (1, 1), (2, 0)]]
    T = max(sum(a + o for a, o in rows) for rows in layouts) + 2
    B = len(layouts)
    mask, turn = torch.zeros(B, T, dtype=D), torch.full((B, T), -1)
    for i, rows in enumerate(layouts):
        t = 0
        for s, (a, o) in enumerate(rows):
            mask[i, t:t + a] = 1
            turn[i, t:t + a + o] = s
            t += a + o
    values = torch.randn(B, T, generator=g, dtype=D)
    kl = torch.randn(B, T, generator=g, dtype=D) * 0.1
    rewards = torch.rand(B, generator=g, dtype=D)
    full = RolloutBatch(response_ids=torch.zeros(B, T, dtype=torch.long), mask=mask, group=torch.zeros(B).long(),
                        rewards=rewards, values=values, token_rewards=kl, turn=turn)
    keep = [mask[i] > 0 for i in range(B)]  # the compact rows: action tokens only
    width = max(int(k.sum()) for k in keep)
    pad = lambda rows: torch.stack([torch.cat([r, torch.zeros(width - len(r), dtype=D)]) for r in rows])  # noqa
    compact = RolloutBatch(response_ids=torch.zeros(B, width, dtype=torch.long),
                           mask=pad([mask[i][keep[i]] for i in range(B)]), group=torch.zeros(B).long(),
                           rewards=rewards, values=pad([values[i][keep[i]] for i in range(B)]),
                           token_rewards=pad([kl[i][keep[i]] for i in range(B)]))
    return full, compact, keep


def on_actions(x, keep):
    return torch.cat([x[i][k] for i, k in enumerate(keep)])


@pytest.mark.covers("gae", "reinforce_plus_plus")
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_estimators_see_a_multi_turn_response_as_its_action_tokens(seed):
    """Cutting the observation tokens out changes no advantage, return or value target on an action token:
    they neither end the recursion (reset) nor feed it (values, token rewards)."""
    full, compact, keep = multi_turn_batch(seed)
    torch.testing.assert_close(on_actions(token_rewards(full), keep), on_actions(token_rewards(compact), [
        compact.mask[i] > 0 for i in range(compact.size)]))
    cmask = [compact.mask[i] > 0 for i in range(compact.size)]
    for name, fn in [("gae", lambda b: gae(b, gamma=0.97, lam=0.9, whiten=False)),
                     ("gae-whitened", lambda b: gae(b, gamma=1.0, lam=0.95)),
                     ("gae-returns", lambda b: gae_returns(b, gamma=0.9, lam=0.7)),
                     ("reinforce++", lambda b: reinforce_plus_plus(b, gamma=0.9))]:
        ours, ref = fn(full), fn(compact)
        torch.testing.assert_close(on_actions(ours, keep), on_actions(ref, cmask), rtol=0, atol=1e-12,
                                   msg=lambda m: f"{name}: {m}")
        assert torch.all(ours[full.mask == 0] == 0), name


def gridworld_batch(seed: int):
    """A gridworld group sampled by a scripted policy that knows the map and moves along a shortest path with
    probability 0.6, at random otherwise: some trajectories reach the goal, and they revisit positions."""
    tok = char_tokenizer()
    rng = random.Random(seed)
    task = get_task("gridworld", size=5, walls=6, min_distance=4)  # short enough for a 60% policy to get there
    examples = task.eval_set(2)

    policy = gridworld_policy(examples, rng)

    return turns(ScriptedEngine(tok, policy), task, examples, group_size=6, sampling=Sampling(4))


@pytest.mark.covers("gigpo")
def test_gigpo_reads_anchor_states_and_step_rewards_from_the_rollout():
    batch = gridworld_batch(0)
    states = [[info["state"] for info in row] for row in batch.turn_info]
    assert all(isinstance(s, tuple) for row in states for s in row)
    start = states[0][0]
    assert sum(row.count(start) for row in states[:6]) > 6  # the start position recurs: anchor groups
    assert 0 < batch.rewards[:6].sum() < 6 and 0 < batch.rewards[6:].sum() < 6  # both groups have spread
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "without anchor states" fallback
        A = gigpo(batch)
    explicit = gigpo(batch, states=states, step_rewards=batch.turn_rewards)
    assert torch.equal(A, explicit)
    assert not torch.allclose(A, grpo(batch))  # the step-level term is there
    # a batch without turn_info still falls back to the episode advantage, with a warning
    bare = RolloutBatch(response_ids=batch.response_ids, mask=batch.mask, group=batch.group, rewards=batch.rewards)
    with pytest.warns(UserWarning, match="without anchor"):
        assert torch.equal(gigpo(bare), grpo(bare))


@pytest.mark.covers("gigpo")
def test_gigpo_step_returns_use_the_environment_step_rewards():
    batch = gridworld_batch(1)
    sparse = gigpo(batch, states=[[i["state"] for i in row] for row in batch.turn_info])  # R on the last step
    # the gridworld pays its reward on the goal step, the last: the batch's turn_rewards say the same
    assert torch.equal(gigpo(batch), sparse)
    batch.turn_rewards = batch.turn_rewards.clone()
    batch.turn_rewards[:, 0] += 0.5  # a shaped first step changes the step-level term only
    assert not torch.equal(gigpo(batch), sparse)
    assert torch.equal(gigpo(batch, omega=0.0), gigpo(batch, states=[[0] * len(r) for r in batch.turn_info],
                                                       omega=0.0))
