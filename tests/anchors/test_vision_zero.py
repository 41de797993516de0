"""Agreement with wangqinsi1/Vision-Zero @ fa3c01c1 (transcribed in formulas_vision_zero.py) on random vote patterns:
the players' `calculate_game_rewards`, the interactive mode's strategic clue rewards with and without the role
baselines (our reward shaping `vision-zero` over a run of one-game steps), the God-decision reward, the judges'
group normalization, the interactive phase switch, and a whole spy game's rewards from the environment."""
from __future__ import annotations

import random

import pytest
import torch

from tests.anchors import formulas_vision_zero as ref
from tests.helpers import step_context
from workbench import registry
from workbench.batch import RolloutBatch
from workbench.envs.spy import SpyTask, vote_action
from workbench.rewards.vision_zero import (ABSTAIN, RoleBaselines, decision_reward, game_rewards, judge_normalized,
                                           strategic_clue_rewards)
from workbench.schedules.vision_zero import vision_zero_phase

pytestmark = pytest.mark.covers("vision-zero")


def random_vote(rng: random.Random, n: int):
    """A vote as our functions take it: a player, an out-of-range number, an abstention or no vote."""
    return rng.choice([*range(1, n + 1), *range(1, n + 1), n + 1, 9, ABSTAIN, None])


def as_theirs(vote):
    return None if vote is None else {"voted_spy": vote, "reasoning": ""}


def cases(seed: int, count: int, voters=None):
    rng = random.Random(seed)
    for _ in range(count):
        n = rng.randint(3, 6)
        k = voters or n
        yield n, rng.randint(1, n), [random_vote(rng, n) for _ in range(k if k != "judges" else rng.randint(1, 8))]


@pytest.mark.parametrize("seed", range(3))
def test_game_rewards_are_calculate_game_rewards(seed):
    for n, spy, votes in cases(seed, 300):
        theirs = ref.Generator().calculate_game_rewards({"num_players": n, "spy_player": spy},
                                                        [as_theirs(v) for v in votes])
        assert game_rewards(votes, spy) == pytest.approx(theirs, abs=1e-12), (n, spy, votes)


@pytest.mark.parametrize("seed", range(3))
def test_strategic_clue_rewards_are_the_references_without_baselines(seed):
    for n, spy, votes in cases(seed, 300, voters="judges"):
        theirs = ref.calculate_strategic_clue_rewards({"spy_player": spy}, [as_theirs(v) for v in votes], n,
                                                      apply_role_advantage=False)
        assert strategic_clue_rewards(votes, spy, n) == pytest.approx(theirs, abs=1e-12), (n, spy, votes)


def game_batch(n: int, spy: int, votes: list, rewards: list[float], episode: int = 0) -> RolloutBatch:
    """One spy game's rows (players then judges) as the multi-agent rollout gives them."""
    roles = tuple("spy" if k == spy else "civilian" for k in range(1, n + 1)) + ("judge",) * len(votes)
    info = [[{"phase": "clue", "roles": roles, "spy": spy}] for _ in range(n)]
    info += [[{"phase": "vote", "roles": roles, "spy": spy, "vote": v}] for v in votes]
    B = len(roles)
    return RolloutBatch(response_ids=torch.zeros(B, 1, dtype=torch.long), mask=torch.ones(B, 1),
                        group=torch.zeros(B, dtype=torch.long), rewards=torch.tensor(rewards, dtype=torch.float64),
                        agent=torch.arange(B), episode=torch.full((B,), episode), turn_info=info)


def test_the_reward_shaping_over_one_game_steps_is_the_references_role_adjustment_and_normalization():
    """The authors' run: one game per step, the role baselines updated with it, then subtracted; the God decisions'
    rewards z-scored across the generations."""
    shaping, generator, state = registry.get("reward_shaping", "vision-zero").fn, ref.Generator(), RoleBaselines()
    for step, (n, spy, votes) in enumerate(cases(7, 40, voters="judges")):
        clue = strategic_clue_rewards(votes, spy, n)
        judges = [decision_reward(v, spy, n) for v in votes]
        ctx = step_context(step, 40, state=state)
        shaped = shaping(game_batch(n, spy, votes, clue + judges), ctx)
        ours = shaped.rewards - shaped.baseline_rewards  # what remax makes the advantage: the authors' rewards
        theirs_clue = ref.calculate_strategic_clue_rewards({"spy_player": spy}, [as_theirs(v) for v in votes], n,
                                                           generator=generator)
        theirs_judges = ref.apply_group_normalization(
            [ref.god_decision_reward(as_theirs(v), spy, v is not None) for v in votes])
        torch.testing.assert_close(ours[:n], torch.tensor(theirs_clue, dtype=torch.float64), rtol=0, atol=1e-12)
        torch.testing.assert_close(ours[n:], torch.tensor(theirs_judges, dtype=torch.float64), rtol=1e-5, atol=1e-5)
        assert (state.b_spy, state.b_civ) == pytest.approx((generator.b_spy, generator.b_civ), abs=1e-12)
    assert state.b_spy != 0.0


@pytest.mark.parametrize("seed", range(3))
def test_decision_reward_is_the_god_decision_reward(seed):
    for n, spy, votes in cases(seed, 100):
        for v in votes:  # our format verdict: the vote parsed
            assert decision_reward(v, spy, n) == pytest.approx(ref.god_decision_reward(as_theirs(v), spy,
                                                                                       v is not None), abs=1e-12)


def test_judge_normalization_is_apply_group_normalization_including_equal_and_single_groups():
    rng = random.Random(0)
    groups = [[rng.choice([2.49, -0.9, -0.3, -1.5]) for _ in range(rng.randint(1, 8))] for _ in range(200)]
    groups += [[2.49] * 8, [-0.9, -0.9], [1.0]]
    for rewards in groups:
        assert judge_normalized(rewards) == pytest.approx(ref.apply_group_normalization(rewards), rel=1e-5,
                                                          abs=1e-5)


@pytest.mark.parametrize("cycle", [1, 2, 3, 10])
def test_the_phase_schedule_is_the_interactive_switch(cycle):
    for step in range(60):
        theirs = ref.interactive_training_phase(step, cycle)
        assert vision_zero_phase(step, 60, cycle_length=cycle) == {"decision": 1.0, "clue": 0.0}[theirs]


@pytest.mark.parametrize("judges", [0, 3, 8])
def test_a_whole_game_pays_the_references_rewards(judges):
    """Legal clues, random votes: the environment's rewards are the reference's for those votes (players' game
    rewards without judges; strategic clue rewards and God-decision rewards with them)."""
    task, rng = SpyTask(judges=judges), random.Random(judges)
    for i in range(20):
        example = task.make_example(rng)
        env = task.make_env()
        env.reset(example, i)
        votes, total = [], [0.0] * len(env.agents)
        while (agent := env.to_move()) is not None:
            if env.order[env.t][1] == "clue":
                action = env.scenes[agent][0] + "."
            else:
                votes.append(random_vote(rng, env.n))
                action = "V0." if votes[-1] is None else vote_action(votes[-1])
            _, rewards, done, _ = env.step(action)
            total = [t + r for t, r in zip(total, rewards)]
        game = {"num_players": env.n, "spy_player": env.spy}
        if judges:
            theirs = ref.calculate_strategic_clue_rewards(game, [as_theirs(v) for v in votes], env.n,
                                                          apply_role_advantage=False)
            theirs += [ref.god_decision_reward(as_theirs(v), env.spy, v is not None) for v in votes]
        else:
            theirs = ref.Generator().calculate_game_rewards(game, [as_theirs(v) for v in votes])
        assert total == pytest.approx(theirs, abs=1e-12)
