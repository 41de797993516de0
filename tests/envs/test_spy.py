"""Who is the spy, in text: the deal, the views and turn order, what each agent observes, the phases each step
reports, illegal actions (a penalty and a message, never a crash), the rewards at the end (the reward module's), the
Python players, the expert's game as the SFT warm start encodes it, the multi-agent rollout over the game with the
phase mask and the reward shaping on its batch, and the evaluation."""
from __future__ import annotations

import random

import pytest
import torch

from tests.helpers import step_context
from tests.rollout.scripted import ScriptedEngine
from workbench import registry
from workbench.envs.spy import (ILLEGAL_CLUE, OBJECTS, SpyTask, parse_answer, parse_vote, random_player,
                                scripted_player, voted)
from workbench.models import build_tiny, char_tokenizer
from workbench.rewards.vision_zero import (ABSTAIN, RoleBaselines, decision_reward, game_rewards,
                                           strategic_clue_rewards)
from workbench.rollout import HFEngine, Sampling
from workbench.rollout.agents import GamePolicy, agents, expert_rows
from workbench.tasks import Example

pytestmark = pytest.mark.covers("vision-zero")
TOK = char_tokenizer()
# spy = player 2, one object (the second) replaced
DEAL = Example(prompt="P1 civ:red cube,blue ball,green cone,gray ring",
               answer="2|red cube,blue ball,green cone,gray ring|red cube,pink ball,green cone,gray ring", target="")


def text(messages) -> str:
    return "".join(m["content"] for m in messages)


def play(env, actions):
    """Step `actions` in turn order; (every agent's transcript, total rewards, last info)."""
    views, info = env.reset(DEAL, 0)
    seen, total = [text(v) for v in views], [0.0] * len(env.agents)
    for action in actions:
        agent = env.to_move()
        seen[agent] += action
        observations, rewards, done, info = env.step(action)
        seen = [s + text(o) for s, o in zip(seen, observations)]
        total = [t + r for t, r in zip(total, rewards)]
    return seen, total, info, done


def test_deals_differ_in_one_object_the_spy_is_a_player_and_draws_are_seeded():
    task = SpyTask(players=5, objects=6)
    for seed in range(50):
        example = task.make_example(random.Random(seed))
        assert example == task.make_example(random.Random(seed))
        spy, civilian, odd = parse_answer(example.answer)
        assert 1 <= spy <= 5 and len(set(civilian)) == 6 and set(civilian) <= set(OBJECTS)
        changed = [i for i, (a, b) in enumerate(zip(civilian, odd)) if a != b]
        assert len(changed) == 1 and odd[changed[0]] not in civilian
        assert example.prompt.startswith("P1 spy:" if spy == 1 else "P1 civ:")


def test_views_turn_order_observations_and_phases():
    env = SpyTask(judges=2).make_env()
    views, info = env.reset(DEAL, 0)
    assert env.agents == ("P1", "P2", "P3", "P4", "J1", "J2")
    assert [text(v) for v in views] == [
        "P1 civ:red cube,blue ball,green cone,gray ring\n1:", "P2 spy:red cube,pink ball,green cone,gray ring",
        "P3 civ:red cube,blue ball,green cone,gray ring", "P4 civ:red cube,blue ball,green cone,gray ring",
        "J:red cube,blue ball,green cone,gray ring", "J:red cube,blue ball,green cone,gray ring"]
    assert info["phase"] == "clue" and info["roles"] == ("civilian", "spy", "civilian", "civilian", "judge", "judge")
    order, phases = [], []
    clues = ["red cube.", "pink ball.", "green cone.", "gray ring."] * 2
    for action in clues + ["V2.", "V?."]:
        order.append(env.to_move())
        _, _, done, info = env.step(action)
        phases.append(info["phase"])
    assert order == [0, 1, 2, 3, 0, 1, 2, 3, 4, 5] and env.to_move() is None and done
    assert phases == ["clue"] * 8 + ["vote"] * 2
    seen, _, _, _ = play(SpyTask(judges=2).make_env(), clues + ["V2.", "V?."])
    assert seen[1] == ("P2 spy:red cube,pink ball,green cone,gray ring\n1:red cube.\n2:pink ball.\n3:green cone."
                       "\n4:gray ring.\n1:red cube.\n2:pink ball.\n3:green cone.\n4:gray ring.")
    assert seen[4] == "J:red cube,blue ball,green cone,gray ring" + "".join(
        f"\n{k}:{c}" for k, c in zip([1, 2, 3, 4] * 2, clues)) + "\nvote:V2."  # no judge sees another's vote
    assert len(seen[4]) < 256 and max(map(len, seen)) < 256  # the tiny model's context


def test_the_last_vote_pays_every_agent_the_reward_modules_rewards():
    clues = ["red cube.", "pink ball.", "green cone.", "gray ring."] * 2  # the spy named its odd object
    _, total, info, done = play(SpyTask(judges=3).make_env(), clues + ["V2.", "V2.", "V1."])
    assert done and info["state"] is None and info["vote"] == 1 and info["spy"] == 2
    assert total == pytest.approx(strategic_clue_rewards([2, 2, 1], 2, 4) +
                                  [decision_reward(v, 2, 4) for v in (2, 2, 1)])
    assert sum(total[:4]) == pytest.approx(0.0)  # the players' clue rewards are zero-sum
    _, total, _, _ = play(SpyTask(judges=0).make_env(), clues + ["V2.", "V3.", "V2.", "V?."])
    assert total == pytest.approx(game_rewards([2, 3, 2, ABSTAIN], 2))  # the players vote: not zero-sum


def test_illegal_actions_get_a_message_and_a_penalty_never_a_crash():
    env = SpyTask(judges=1).make_env()
    with pytest.raises(RuntimeError, match="step before reset"):
        env.step("red cube.")
    env.reset(DEAL, 0)
    observations, rewards, done, info = env.step("pink ball.")  # P1 (civilian) names an object it does not see
    assert rewards[0] == ILLEGAL_CLUE and sum(rewards) == ILLEGAL_CLUE and not done
    assert text(observations[0]) == "\nillegal: 'pink ball' is not in your scene"
    assert text(observations[1]) == "\n1:?.\n2:" and text(observations[4]) == "\n1:?."  # the next mover is cued
    assert info["tool_error"] and info["clue"] is None and info["mover"] == 0
    for action in ["pink ball.", "red cube.", "gray ring."] + ["nonsense"] * 4:
        env.step(action)
    observations, rewards, done, info = env.step("V7.")  # the judge names no player
    assert done and info["vote"] == 7 and info["tool_error"] == "vote V1..V4 or V?"
    assert text(observations[4]) == "\nillegal: vote V1..V4 or V?"
    assert rewards[4] == pytest.approx(decision_reward(7, 2, 4))
    _, rewards, done, info = env.step("V1.")
    assert done and rewards == [0.0] * 5 and info["tool_error"] == "the game is over"
    assert parse_vote("V?") == ABSTAIN and parse_vote(" V3. ") == 3 and parse_vote("V0") is None
    assert parse_vote("V12") is None and parse_vote("vote 2") is None


def test_python_players():
    task, rng = SpyTask(judges=4), random.Random(0)
    exposed_when_late = blended = 0
    for i in range(60):
        example = task.make_example(rng)
        env = task.make_env()
        env.reset(example, i)
        while (agent := env.to_move()) is not None:
            copyable = agent < env.n and any(c in env.scenes[agent] for k, c in env.clues if k != agent + 1)
            action = scripted_player(env, rng) if i % 2 else random_player(env, rng)
            _, _, _, info = env.step(action)
            assert info["tool_error"] is None  # both players only say what they see and vote for players
            if i % 2 and info["phase"] == "clue" and agent + 1 == env.spy and copyable:
                blended += 1
                exposed_when_late += info["clue"] not in env.civilian
            if i % 2 and info["phase"] == "vote":
                exposed = [k for k, c in env.clues if c not in env.civilian]
                if exposed:  # a scripted judge names the player whose clue it cannot see
                    assert info["vote"] == exposed[0] == env.spy
    assert blended > 20 and exposed_when_late == 0  # a scripted spy repeats a clue it also sees when there is one


def test_the_expert_game_is_the_game_the_warm_start_encodes():
    task = SpyTask(judges=2, expert="scripted")
    example = task.make_example(random.Random(5))
    game = task.expert_game(example, seed=11)
    assert [agent for agent, _ in game] == [0, 1, 2, 3] * 2 + [4, 5]
    rows = expert_rows(TOK, task, example, 11)
    assert len(rows) == 6
    for agent, (_, episode) in enumerate(rows):
        assert [step["action"] for step in episode.info] == [a for k, a in game if k == agent]
        assert episode.rewards[-1] != 0.0 or agent < 4  # judges are paid at the end


def scripted_text_policy(history: str) -> str:
    """The ScriptedEngine's player: a vote for player 1 when cued, else the first object of the row's scene."""
    history = history.replace("<bos>", "")
    if history.endswith("vote:"):
        return "V1."
    return history.split(":", 1)[1].split("\n")[0].split(",")[0] + "."


def test_the_multi_agent_rollout_phase_mask_and_shaping_work_on_the_games_batch():
    task = SpyTask(judges=3)
    examples = [task.make_example(random.Random(s)) for s in range(2)]
    batch = agents(ScriptedEngine(TOK, scripted_text_policy), task, examples, group_size=2, sampling=Sampling(16))
    assert batch.size == 2 * 2 * 7 and batch.agent.tolist()[:7] == list(range(7))
    assert all(step["tool_error"] is None for info in batch.turn_info for step in info)
    judges = batch.agent >= 4
    phases = [[step["phase"] for step in info] for info in batch.turn_info]
    assert all(p == ["vote"] for p, j in zip(phases, judges.tolist()) if j)
    assert all(p == ["clue", "clue"] for p, j in zip(phases, judges.tolist()) if not j)
    mask = registry.get("token_mask", "vision-zero").fn
    vote, clue = mask(batch, phase=1.0), mask(batch, phase=0.0)
    assert torch.equal(vote.sum(-1) > 0, judges) and torch.equal(clue.sum(-1) > 0, ~judges)
    assert torch.equal(vote + clue, batch.mask)
    for e in range(4):  # every game's players' returns sum to 0 (all clues were legal)
        assert float(batch.rewards[(batch.episode == e) & ~judges].sum()) == pytest.approx(0.0, abs=1e-6)
    shaped = registry.get("reward_shaping", "vision-zero").fn(batch, step_context(state=RoleBaselines()))
    advantages = registry.get("advantage", "remax").fn(shaped)  # the authors' advantage: A = R - b_role
    expected = (shaped.rewards - shaped.baseline_rewards)[:, None] * batch.mask
    torch.testing.assert_close(advantages, expected)
    assert torch.equal(shaped.rewards[~judges], batch.rewards[~judges]) and bool((shaped.baseline_rewards[~judges]
                                                                                  != 0).any())


def test_knobs_are_checked():
    with pytest.raises(ValueError, match=r"3 <= players <= 9 .* got 10; 0 <= judges <= 16 .* got -1"):
        SpyTask(players=10, judges=-1)
    with pytest.raises(ValueError, match="expert one of"):
        SpyTask(expert="solver")
    with pytest.raises(ValueError, match="wrong type for rounds='2'"):
        SpyTask(rounds="2")
    env = SpyTask(players=3).make_env()
    with pytest.raises(ValueError, match="not a game of 3 players and 4 objects"):
        env.reset(Example(prompt="", answer="4|a,b,c,d|a,b,c,e", target=""), 0)


def test_evaluation_plays_every_seat_and_reads_the_votes():
    model, tokenizer = build_tiny(seed=0)
    task = SpyTask(judges=1, rounds=1, eval_examples=1)
    policy = GamePolicy(HFEngine(model, tokenizer), model, tokenizer, Sampling(8))
    accuracy, records, metrics = task.evaluate(policy)
    assert 0.0 <= accuracy <= 1.0 and len(records) == 2 * 5
    assert {r["role"] for r in records} == {"civilian", "spy", "judge"}
    assert set(metrics) == {"civilian_return", "spy_return", "judge_return", "illegal"}
    assert voted("J:a\n1:b.\nvote:V3.") == 3 and voted("P1 civ:a\n1:") is None
