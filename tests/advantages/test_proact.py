"""ProAct's Monte Carlo critic: the random-policy estimators, MC-GRPO's state groups and fallback, MC-PPO's mixed
baseline, and the reward shaping on grid-world episodes."""
import copy
import random

import pytest
import torch

from tests.helpers import D
from tests.rollout.scripted import ScriptedEngine, gridworld_policy
from workbench import registry
from workbench.advantages.gae import gae
from workbench.advantages.proact import (
    fallback_advantage,
    mc_estimate,
    proact_mc_critic,
    proact_mc_values,
    proact_targets,
    random_return,
)
from workbench.batch import RolloutBatch
from workbench.context import StepContext
from workbench.envs.base import Env
from workbench.models import char_tokenizer
from workbench.recipes import Recipe, get_recipe, use, with_overrides
from workbench.rollout import Sampling, turns
from workbench.tasks import get_task
from workbench.train.pipeline import Pipeline

pytestmark = pytest.mark.covers("proact-mc-critic")


class Walk(Env):
    """A random walk on 0..L: "L"/"R" move one cell, reward 1 on reaching L; 0 and L end the episode.
    Under uniformly random moves (gamma 1) V(p) = p / L and Q(p, R) = (p + 1) / L."""

    max_turns = 100

    def __init__(self, L=4, start=2):
        self.L, self.pos = L, start

    def actions(self):
        return ["L", "R"]

    def step(self, action):
        self.pos += 1 if action == "R" else -1
        return [], float(self.pos == self.L), self.pos in (0, self.L), {"state": self.pos}


def estimates(n, reps, **kw):
    return torch.tensor([mc_estimate(Walk(), random.Random(r), n=n, gamma=1.0, max_steps=1000, **kw)
                         for r in range(reps)], dtype=D)


def test_mc_value_is_unbiased_and_its_variance_falls_as_one_over_n():
    v4, v16 = estimates(4, 300), estimates(16, 300)
    assert abs(float(v16.mean()) - 0.5) < 4 * (0.25 / (16 * 300)) ** 0.5          # V(2) = 2/4, 4 standard errors
    assert abs(float(v4.mean()) - 0.5) < 4 * (0.25 / (4 * 300)) ** 0.5
    ratio = float(v4.var() / v16.var())
    assert 2.8 < ratio < 5.5, ratio                                                 # 16 / 4 = 4
    q = estimates(16, 300, first="R")
    assert abs(float(q.mean()) - 0.75) < 4 * (0.1875 / (16 * 300)) ** 0.5          # Q(2, R) = 3/4


class Clock(Env):
    """Reward 1 on every step, never done: a return counts its steps."""

    def actions(self):
        return ["tick"]

    def step(self, action):
        return [], 1.0, False, {"state": None}


def test_rollouts_stop_at_max_steps_and_discount():
    rng = random.Random(0)
    assert random_return(Clock(), rng, gamma=0.5, max_steps=3) == 1 + 0.5 + 0.25                # V: 3 steps
    assert random_return(Clock(), rng, gamma=0.5, max_steps=3, first="tick") == 1 + 0.5 + 0.25  # Q: 3 steps too
    assert random_return(Clock(), rng, gamma=0.5, max_steps=3, first="tick", reference_bug=True) == 1.875  # the code: 4
    assert random_return(Walk(L=4, start=3), rng, gamma=0.5, max_steps=5, first="R") == 1.0   # the first move wins
    assert random_return(Walk(L=10, start=5), rng, gamma=0.5, max_steps=3) == 0.0            # the goal is 5 away


# ---------------------------------------------------------------------------------------------------- advantages

def turn_batch(rows, tokens_per_turn=2, obs_tokens=1):
    """A multi-turn batch: rows = [(group, [(state, action, reward), ...]), ...]; each turn is `tokens_per_turn`
    policy tokens then `obs_tokens` observation tokens (none after the last turn)."""
    width = max(len(turns_) * (tokens_per_turn + obs_tokens) for _, turns_ in rows)
    B = len(rows)
    mask, turn = torch.zeros(B, width, dtype=D), torch.full((B, width), -1, dtype=torch.long)
    S = max(len(t) for _, t in rows)
    turn_rewards = torch.zeros(B, S, dtype=D)
    for i, (_, steps) in enumerate(rows):
        t = 0
        for s, (_, _, r) in enumerate(steps):
            mask[i, t:t + tokens_per_turn] = 1.0
            last = s == len(steps) - 1
            turn[i, t:t + tokens_per_turn + (0 if last else obs_tokens)] = s
            t += tokens_per_turn + (0 if last else obs_tokens)
            turn_rewards[i, s] = r
    return RolloutBatch(response_ids=torch.zeros(B, width, dtype=torch.long), mask=mask,
                        group=torch.tensor([g for g, _ in rows]), rewards=turn_rewards.sum(-1), turn=turn,
                        turn_rewards=turn_rewards,
                        turn_info=[[{"state": st, "action": a} for st, a, _ in steps] for _, steps in rows])


def first_token_of(batch, i, s):
    return int(torch.nonzero((batch.turn[i] == s) & (batch.mask[i] > 0))[0])


def test_mc_grpo_normalizes_q_over_the_responses_of_a_state():
    batch = turn_batch([(0, [("s", "U", 0.0), ("a", "R", 1.0)]), (0, [("s", "D", 0.0)]), (0, [("s", "U", 0.0)])])
    batch.turn_q = torch.tensor([[0.2, 1.0], [0.6, 0.0], [0.2, 0.0]], dtype=D)
    batch.turn_info[0][1]["q_moves"] = {"U": 0.1, "D": 0.2, "L": 0.3, "R": 1.0}
    A = proact_mc_critic(batch)
    q = torch.tensor([0.2, 0.6, 0.2], dtype=D)
    z = (q - q.mean()) / (q.std() + 1e-5)                                   # Bessel + 1e-5 (group_normalization)
    for i in range(3):
        assert float(A[i, first_token_of(batch, i, 0)]) == pytest.approx(float(z[i]))
    moves = torch.tensor([0.1, 0.2, 0.3, 1.0], dtype=D)                     # row 0, turn 1: alone in its state
    assert float(A[0, first_token_of(batch, 0, 1)]) == pytest.approx(float((1.0 - moves.mean()) / (moves.std() + 1e-5)))
    assert bool((A[batch.mask == 0] == 0).all())
    # every turn's value on all of its action tokens
    assert float(A[0, 0]) == float(A[0, 1])


def test_same_action_fallback_uses_every_move():
    batch = turn_batch([(0, [("s", "R", 0.0)]), (0, [("s", " R", 0.0)]), (1, [("s", "R", 0.0)])])
    batch.turn_q = torch.tensor([[0.7], [0.7], [0.3]], dtype=D)
    moves = {"U": 0.1, "D": 0.5, "L": 0.2, "R": 0.7}
    for row in batch.turn_info:
        row[0]["q_moves"] = moves
    A = proact_mc_critic(batch)
    m = torch.tensor(list(moves.values()), dtype=D)
    assert float(A[0, 0]) == pytest.approx(float((0.7 - m.mean()) / (m.std() + 1e-5)))   # "R" and " R": one action
    assert float(A[1, 0]) == float(A[0, 0])
    assert float(A[2, 0]) == pytest.approx(float((0.3 - m.mean()) / (m.std() + 1e-5)))    # another prompt: its own
    tied = {"U": 0.5, "D": 0.5}
    assert fallback_advantage(0.5, tied, eps=1e-5, reference_bug=False) == 0.0
    assert fallback_advantage(0.5, tied, eps=1e-5, reference_bug=True) != fallback_advantage(0.5, tied, eps=1e-5,
                                                                                           reference_bug=True)  # NaN
    del batch.turn_info[2][0]["q_moves"]
    with pytest.raises(ValueError, match="q_moves"):
        proact_mc_critic(batch)


def ppo_batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    batch = turn_batch([(0, [("a", "R", 0.0), ("b", "U", 0.5), ("c", "L", 1.0)]), (0, [("a", "L", 0.0),
                        ("d", "D", 0.0)]), (1, [("e", "R", 1.0)])], tokens_per_turn=1, obs_tokens=0)
    batch.values = torch.randn(batch.mask.shape, generator=g, dtype=D) * batch.mask
    batch.old_values = batch.values.clone()
    batch.turn_values = torch.rand(3, 3, generator=g, dtype=D)
    return batch


@pytest.mark.parametrize("lam", [0.0, 0.95])
def test_mc_ppo_with_w_zero_is_turn_level_gae(lam):
    """One token per turn, no observations: turn GAE is token GAE (`gae`) with the turn rewards as token rewards."""
    batch = ppo_batch()
    ours = proact_mc_critic(batch, mode="ppo", mc_value_weight=0.0, gamma=0.9, lam=lam, whiten=False)
    plain = RolloutBatch(response_ids=batch.response_ids, mask=batch.mask, group=batch.group,
                         rewards=torch.zeros(3, dtype=D), values=batch.values,
                         token_rewards=batch.turn_rewards[:, :batch.mask.shape[1]] * batch.mask)
    torch.testing.assert_close(ours, gae(plain, gamma=0.9, lam=lam, whiten=False))


def test_mc_ppo_mixes_the_baseline_by_hand():
    """lam 0: A_s = r_s + gamma V_mix(s+1) - V_mix(s), V_mix = 0.1 V_phi + 0.9 V_MC; R_s = A_s + V_mix(s)."""
    batch = ppo_batch(1)
    w, gamma = 0.9, 0.9
    A = proact_mc_critic(batch, mode="ppo", whiten=False)
    returns, value_mask = proact_targets(batch, mode="ppo")
    for i, n in enumerate([3, 2, 1]):
        mix = [(1 - w) * float(batch.values[i, s]) + w * float(batch.turn_values[i, s]) for s in range(n)] + [0.0]
        for s in range(n):
            expected = float(batch.turn_rewards[i, s]) + gamma * mix[s + 1] - mix[s]
            assert float(A[i, s]) == pytest.approx(expected)
            assert float(returns[i, s]) == pytest.approx(expected + mix[s]) and value_mask[i, s] == 1
    whitened = proact_mc_critic(batch, mode="ppo")
    valid = batch.mask > 0
    assert abs(float(whitened[valid].mean())) < 1e-9 and float(whitened[valid].std()) == pytest.approx(1.0, abs=1e-4)
    with pytest.raises(ValueError, match="trains no critic"):
        proact_targets(batch, mode="grpo")
    batch.values = None
    with pytest.raises(ValueError, match="critic"):
        proact_mc_critic(batch, mode="ppo")


# ---------------------------------------------------------------------------------------------------- the shaping

@pytest.fixture(scope="module")
def grid():
    """(batch, task, examples): two grid-world groups of 4 episodes of a scripted 60%-shortest-path policy."""
    task = get_task("gridworld", size=5, walls=6, min_distance=4)
    examples = task.eval_set(2)
    engine = ScriptedEngine(char_tokenizer(), gridworld_policy(examples, random.Random(0)))
    return turns(engine, task, examples, group_size=4, sampling=Sampling(4)), task, examples


def context(task, examples, group_size=4, seed=0):
    return StepContext(step=0, total_steps=1, seed=seed, group_size=group_size, prompts_per_step=len(examples),
                       max_new_tokens=4, examples=examples, task=task, component="reward_shaping:proact-mc-critic")


def test_shaping_values_grid_world_turns_reproducibly(grid):
    batch, task, examples = grid
    ctx = context(task, examples)
    out = proact_mc_values(copy.deepcopy(batch), ctx, num_rollouts=6, max_steps=12)
    q = out.turn_q
    assert q.shape == (batch.size, max(len(r) for r in batch.turn_info)) and bool(((q >= 0) & (q <= 1)).all())
    won = batch.turn_rewards == 1.0                       # the move that reached the goal: Q = 1 exactly
    assert bool(won.any()) and bool((q[won] == 1.0).all())
    seen = {}
    for i, row in enumerate(out.turn_info):                # one estimate per (group, turn, state, action)
        for s, info in enumerate(row):
            key = (int(batch.group[i]), s, info["state"], info["action"].strip())
            assert seen.setdefault(key, float(q[i, s])) == float(q[i, s])
    fallbacks = [info for row in out.turn_info for info in row if "q_moves" in info]
    assert fallbacks and all(set(info["q_moves"]) == {"U", "D", "L", "R"} for info in fallbacks)
    again = proact_mc_values(copy.deepcopy(batch), context(task, examples), num_rollouts=6, max_steps=12)
    torch.testing.assert_close(again.turn_q, q)
    other = proact_mc_values(copy.deepcopy(batch), context(task, examples, seed=1), num_rollouts=6, max_steps=12)
    assert not torch.equal(other.turn_q, q)                 # the rollouts come from the step's random stream
    assert ctx.metrics["proact/rollouts"] > 0 and 0 < ctx.metrics["proact/fallback_frac"] <= 1
    A = proact_mc_critic(out)
    assert bool(torch.isfinite(A).all()) and bool((A[batch.mask == 0] == 0).all())
    every = proact_mc_values(copy.deepcopy(batch), context(task, examples), num_rollouts=2, max_steps=4, moves="all")
    assert all("q_moves" in info for row in every.turn_info for info in row)
    ppo = proact_mc_values(copy.deepcopy(batch), ctx, mode="ppo", num_rollouts=6, max_steps=12)
    assert ppo.turn_values is not None and bool(((ppo.turn_values >= 0) & (ppo.turn_values <= 1)).all())


def test_needs_a_multi_turn_task_with_copyable_enumerable_environments():
    recipe = Recipe(key="r", title="t", summary="s", reward_shaping=[use("proact-mc-critic")],
                    advantage=[use("proact-mc-critic")])
    pipeline = Pipeline(recipe)
    pipeline.check_task(get_task("gridworld"))
    with pytest.raises(ValueError, match="episodes of several turns"):
        pipeline.check_task(get_task("addition"))
    with pytest.raises(ValueError, match="reads"):                     # the advantage without its values
        Pipeline(Recipe(key="r", title="t", summary="s", advantage=[use("proact-mc-critic")]))
    assert registry.get("reward_shaping", "proact-mc-critic").defaults["num_rollouts"] == 1000


@pytest.mark.parametrize("target, overrides, message", [
    ("reward_shaping:proact-mc-critic", {"num_rollouts": 0}, r"reward_shaping 'proact-mc-critic': proact-mc-critic: "
                                                              r"num_rollouts and max_steps must be >= 1, got 0"),
    ("reward_shaping:proact-mc-critic", {"moves": "every"}, r"moves='every' is not one of \['fallback', 'all'\]"),
    ("advantage:proact-mc-critic", {"mc_value_weight": 1.5}, r"mc_value_weight must be in \[0, 1\], got 1.5"),
    ("advantage:proact-mc-critic", {"returns": "mix"}, r"returns='mix' is not one of \['mixed', 'critic'\]"),
])
def test_settings_it_cannot_take_are_refused_when_the_recipe_is_built(target, overrides, message):
    with pytest.raises(ValueError, match=message):
        Pipeline(with_overrides(get_recipe("proact-mc-critic"), {target: overrides}))
