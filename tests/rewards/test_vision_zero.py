"""Vision-Zero's game rewards: the properties the authors' code has (the interactive mode's clue rewards are zero-sum,
and stay so after the role baselines; the players' game rewards are not zero-sum and stay in [-1, 1]), known values,
the judges' normalization and the reward shaping `vision-zero` (baselines updated once per step and given as
baseline_rewards, judges z-scored per game, clear errors)."""
from __future__ import annotations

import random

import pytest
import torch

from tests.helpers import step_context
from workbench import registry
from workbench.batch import RolloutBatch
from workbench.rewards.vision_zero import (ABSTAIN, RoleBaselines, decision_reward, game_rewards, judge_normalized,
                                           role_baselines, strategic_clue_rewards, vote_counts)

pytestmark = pytest.mark.covers("vision-zero")
SHAPING = registry.get("reward_shaping", "vision-zero").fn


def random_votes(rng, n, k):
    return [rng.choice([*range(1, n + 1), ABSTAIN, None, n + 2]) for _ in range(k)]


def test_votes_count_only_players_in_range():
    assert vote_counts([1, 1, 3, ABSTAIN, None, 5, 0, True], 4) == [2, 0, 1, 0]


def test_clue_rewards_are_zero_sum_as_the_interactive_mode_computes_them():
    rng = random.Random(0)
    for _ in range(500):
        n = rng.randint(3, 9)
        r = strategic_clue_rewards(random_votes(rng, n, rng.randint(0, 16)), rng.randint(1, n), n)
        assert sum(r) == pytest.approx(0.0, abs=1e-12)


def test_clue_rewards_known_values():
    # all 8 judges name the spy (player 2): Psi = 8, the spy pays beta Psi, the civilians share it
    assert strategic_clue_rewards([2] * 8, 2, 4) == pytest.approx([0.8 / 3, -0.8, 0.8 / 3, 0.8 / 3])
    # votes spread evenly: no suspicion either way
    assert strategic_clue_rewards([1, 2, 3, 4], 3, 4) == pytest.approx([0.0] * 4)
    # one judge blames civilian 1: Psi = -1/3; civilian 1 pays lambda (1 - 1/3) on top of its share
    r = strategic_clue_rewards([1], 2, 4)
    assert r[1] == pytest.approx(0.1 / 3) and r[0] == pytest.approx(-0.1 / 9 - 0.1 * 2 / 3)
    assert r[2] == r[3] == pytest.approx(-0.1 / 9 + 0.1 / 3)
    # abstentions and unparsable votes count for nobody
    assert strategic_clue_rewards([ABSTAIN, None, 7], 1, 4) == [0.0] * 4


def test_the_role_baselines_keep_the_zero_sum_of_the_players_clue_rewards():
    """b_civ = -b_spy / (N - 1) at every step while each game is zero-sum, so the shifted rewards still sum to 0."""
    rng, ctx = random.Random(2), step_context(state=RoleBaselines())
    for step in range(30):
        games = [game(spy=rng.randint(1, 4), votes=random_votes(rng, 4, 8), episode=e) for e in range(3)]
        shaped = SHAPING(batch_of(*games), ctx)
        out = shaped.rewards.double() - shaped.baseline_rewards.double()
        assert ctx.state.b_civ == pytest.approx(-ctx.state.b_spy / 3, abs=1e-9)
        for e in range(3):
            rows = [12 * e + k for k in range(4)]  # the game's players (each game: 4 players, 8 judges)
            assert float(out[rows].sum()) == pytest.approx(0.0, abs=1e-6)
    assert ctx.state.b_spy != 0.0


def test_role_baselines_are_an_ema_that_settles_on_a_constant_reward():
    b = (0.0, 0.0)
    for _ in range(300):
        b = role_baselines(*b, -0.5, 0.2)
    assert b == pytest.approx((-0.5, 0.2))
    assert role_baselines(1.0, 2.0, 3.0, 4.0, decay=0.0) == (3.0, 4.0)


def test_players_game_rewards_known_values_and_not_zero_sum():
    # the authors' own cases (clevr_spotdiff_generator.py __main__): spy is player 3
    caught = game_rewards([3, 3, 1, 3], 3)
    assert caught == pytest.approx([0.8, 1.0, 1 / 6, 1.0]) and sum(caught) != pytest.approx(0.0)
    assert game_rewards([2, 1, 1, 1], 3) == [-1.0, -1.0, 1.0, -1.0]  # clipped: -1.6, -1.2 and 1 + 2/3
    assert game_rewards([None, 3, ABSTAIN, 3], 3)[0] == -1.0  # no vote: -1, no suspicion term
    assert game_rewards([3, 3, 3, 3], 3)[2] == pytest.approx(1 - 1 + 0 - 1)  # the spy reveals itself
    rng = random.Random(1)
    sums = set()
    for _ in range(300):
        n = rng.randint(3, 9)
        r = game_rewards(random_votes(rng, n, n), rng.randint(1, n))
        assert all(-1.0 <= x <= 1.0 for x in r)
        sums.add(round(sum(r), 9))
    assert len(sums) > 10  # the total changes with the votes: no zero (or constant) sum


def test_decision_reward_known_values():
    assert decision_reward(2, 2, 4) == pytest.approx(0.3 + 1.2 + 0.99)
    assert decision_reward(ABSTAIN, 2, 4) == pytest.approx(0.3 - 0.6)
    assert decision_reward(1, 2, 4) == pytest.approx(0.3 - 1.2)
    assert decision_reward(7, 2, 4) == pytest.approx(0.3 - 1.2)  # parsed but no player: wrong
    assert decision_reward(None, 2, 4) == pytest.approx(-0.3 - 1.2)
    assert decision_reward(2, 2, 4, gamma=0.0, lambda_fmt=0.0, beta_acc=1.0) == 1.0
    with pytest.raises(ValueError, match="spy must be a player number 1..4"):
        decision_reward(1, 5, 4)


def test_judge_normalization():
    r = judge_normalized([2.49, -0.9, -0.9, -0.3])
    t = torch.tensor(r, dtype=torch.float64)
    assert float(t.mean()) == pytest.approx(0.0, abs=1e-12) and float(t.std(unbiased=False)) == pytest.approx(1.0)
    assert judge_normalized([2.49] * 8) == [0.0] * 8  # all equal: centred only
    assert judge_normalized([-0.9]) == [-0.9]         # one judge: as it is


def game(n=4, spy=2, votes=(2, 2, 1), rewards=None, episode=0, drop=()):
    """One game's rows (players, then judges) as the multi-agent rollout lays them out."""
    roles = tuple("spy" if k == spy else "civilian" for k in range(1, n + 1)) + ("judge",) * len(votes)
    info = [[{"phase": "clue", "roles": roles, "spy": spy}] for _ in range(n)]
    info += [[{"phase": "vote", "roles": roles, "spy": spy, "vote": v}] for v in votes]
    if rewards is None:
        rewards = strategic_clue_rewards(list(votes), spy, n) + [decision_reward(v, spy, n) for v in votes]
    keep = [i for i in range(len(roles)) if i not in drop]
    return dict(rewards=[rewards[i] for i in keep], agent=keep, episode=[episode] * len(keep),
                info=[info[i] for i in keep])


def batch_of(*games) -> RolloutBatch:
    rewards = [r for g in games for r in g["rewards"]]
    B = len(rewards)
    return RolloutBatch(response_ids=torch.zeros(B, 1, dtype=torch.long), mask=torch.ones(B, 1),
                        group=torch.zeros(B, dtype=torch.long), rewards=torch.tensor(rewards, dtype=torch.float32),
                        agent=torch.tensor([a for g in games for a in g["agent"]]),
                        episode=torch.tensor([e for g in games for e in g["episode"]]),
                        turn_info=[i for g in games for i in g["info"]])


def test_the_shaping_with_both_parts_off_changes_nothing():
    batch = batch_of(game(), game(spy=4, votes=(4, 4, 4), episode=1))
    out = SHAPING(batch, step_context(state=RoleBaselines()), baselines=False, normalize_judges=False)
    assert torch.equal(out.rewards, batch.rewards) and torch.equal(out.baseline_rewards, torch.zeros(batch.size))


def test_the_shaping_updates_the_baselines_once_per_step_from_the_games_means_and_normalizes_each_games_judges():
    g1, g2 = game(), game(spy=4, votes=(4, ABSTAIN, None, 1), episode=1)
    ctx = step_context(state=RoleBaselines())
    out = SHAPING(batch_of(g1, g2), ctx)
    state = ctx.state
    spy_mean = (g1["rewards"][1] + g2["rewards"][3]) / 2
    civ_mean = (sum(g1["rewards"][i] for i in (0, 2, 3)) / 3 + sum(g2["rewards"][i] for i in (0, 1, 2)) / 3) / 2
    assert state.b_spy == pytest.approx(0.1 * spy_mean) and state.b_civ == pytest.approx(0.1 * civ_mean)
    r = out.rewards.double() - out.baseline_rewards.double()  # remax's A = R - b
    assert r[1] == pytest.approx(g1["rewards"][1] - state.b_spy, abs=1e-6)
    assert r[0] == pytest.approx(g1["rewards"][0] - state.b_civ, abs=1e-6)
    assert out.rewards[:4].tolist() == pytest.approx(g1["rewards"][:4])  # the players' rewards stay
    assert float(out.baseline_rewards[4:7].abs().sum()) == 0.0  # the judges have no role baseline
    for judges in (r[4:7], r[11:15]):  # each game's judges: mean 0, population std 1
        assert float(judges.mean()) == pytest.approx(0.0, abs=1e-6)
        assert float(judges.std(unbiased=False)) == pytest.approx(1.0, abs=1e-6)
    assert ctx.metrics["vision_zero/judge_accuracy"] == pytest.approx(3 / 7)
    assert ctx.metrics["vision_zero/b_spy"] == state.b_spy


def test_a_game_without_its_spy_row_does_not_move_the_baselines():
    ctx = step_context(state=RoleBaselines())
    SHAPING(batch_of(game(drop=(1,))), ctx)
    assert (ctx.state.b_spy, ctx.state.b_civ) == (0.0, 0.0)


def test_the_shaping_refuses_a_batch_that_is_not_a_spy_game_and_bad_settings():
    plain = RolloutBatch.from_rewards([1.0, 0.0])
    with pytest.raises(ValueError, match="needs batch fields"):
        SHAPING(plain, step_context(state=RoleBaselines()))
    plain.agent, plain.episode, plain.turn_info = torch.tensor([0, 1]), torch.tensor([0, 0]), [[{}], [{}]]
    with pytest.raises(ValueError, match="turn_info has no 'roles'.*--task spy"):
        SHAPING(plain, step_context(state=RoleBaselines()))
    with pytest.raises(ValueError, match=r"decay=1.0: .* \[0, 1\)"):
        SHAPING(batch_of(game()), step_context(state=RoleBaselines()), decay=1.0)
    with pytest.raises(ValueError, match="eps=0"):
        registry.get("reward_shaping", "vision-zero").check(eps=0)
