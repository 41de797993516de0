"""Key and door: the key only in the first turns, the door only with the key, the room as the only observation,
an exact verifier, a noisy expert that always solves, copies independent mid-episode."""
import itertools
import random

import pytest

from workbench import registry
from workbench.envs.keydoor import KeydoorEnv, parse_answer
from workbench.episodes import replay
from workbench.tasks import Example, get_task

pytestmark = pytest.mark.covers("keydoor")

TASK = get_task("keydoor")
EX = Example("D412 409", "6|409|412", "KRRRO")  # walk 3 rooms right, budget 3 + 2 + slack 1


def play(example, actions, task=TASK):
    env = task.make_env()
    env.reset(example, 0)
    return [env.step(a) for a in actions]


def test_registered_as_task_and_env_with_every_action_a_stop_string():
    assert registry.get("env", "keydoor").fn is type(TASK) and isinstance(TASK.make_env(), KeydoorEnv)
    env = TASK.make_env()
    assert env.actions() == ["K", "L", "R", "O"] and set(env.stop) == set(env.actions())
    assert get_task("keydoor", distractors=2).make_env().actions() == ["K", "L", "R", "O", "W", "X"]
    assert TASK.max_turns == 5 + 2 + 2 and TASK.eval_file == "keydoor.jsonl"


@pytest.mark.parametrize("kw, match", [
    ({"min_length": 2}, "min_length"), ({"min_length": 5, "max_length": 4}, "min_length"),
    ({"slack": -1}, "slack"), ({"key_turns": 0}, "key_turns"), ({"key_turns": 1}, "skip > 0 only with"),
    ({"slack": 0}, "skip > 0 only with"), ({"skip": 1.0}, "skip"), ({"detour": -0.1}, "detour"),
    ({"distractors": 5}, "distractors")])
def test_knobs_are_validated_with_clear_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        get_task("keydoor", **kw)
    assert get_task("keydoor", key_turns=1, skip=0.0).key_turns == 1


def test_the_door_opens_only_with_the_key_and_the_observation_is_the_room_only():
    steps = play(EX, "KRRRO")
    assert [s[0][0]["content"] for s in steps] == ["\n409", "\n410", "\n411", "\n412", "\n412"]
    assert [s[3]["state"] for s in steps] == [409, 410, 411, 412, 412]
    assert [s[3]["subgoal"] for s in steps] == [1, 1, 1, 1, 1] and [s[1:3] for s in steps][-1] == (1.0, True)
    assert not any(s[2] for s in steps[:-1]) and all(s[3]["tool_error"] is None for s in steps)
    without = play(EX, "RRROOO")  # at the door without the key: nothing opens; the budget of 6 ends it
    assert [s[1] for s in without] == [0.0] * 6 and [s[2] for s in without] == [False] * 5 + [True]
    assert [s[3]["subgoal"] for s in without] == [0] * 6
    assert play(EX, "KRRO")[-1][1:3] == (0.0, False)  # one room short of the door


def test_the_same_observation_recurs_with_and_without_the_key():
    env = TASK.make_env()
    _, info = env.reset(EX, 0)
    assert info == {"state": 409, "subgoal": 0, "tool_error": None}
    with_key = [env.step(a)[3] for a in "KR"]
    env.reset(EX, 0)
    without = [env.step(a)[3] for a in "LR"]  # a bump into the wall behind the start, then one room on
    assert with_key[-1]["state"] == without[-1]["state"] == 410
    assert (with_key[-1]["subgoal"], without[-1]["subgoal"]) == (1, 0)


def test_the_key_only_in_the_first_turns_and_only_in_the_start_room():
    assert play(EX, "LKRRRO")[-1][1] == 1.0  # key_turns = 2: the second turn still reaches it
    assert play(EX, "LLKRRRO"[:6])[-1][1:3] == (0.0, True)  # third turn: too late (and the budget ends)
    one = get_task("keydoor", key_turns=1, skip=0.0)
    assert play(EX, "LKRRRO", one)[-1][1] == 0.0 and play(EX, "KRRRO", one)[-1][1] == 1.0
    assert play(EX, "RKLL", get_task("keydoor", key_turns=3))[1][3]["subgoal"] == 0  # room 410: no key there
    assert [s[3]["state"] for s in play(EX, "LRRRRR")] == [409, 410, 411, 412, 412, 412]  # walls at both ends


def test_an_action_without_a_letter_wastes_a_turn_with_a_tool_error():
    steps = play(EX, ["xx", "K", "?", "RRR"])
    assert steps[0][3]["tool_error"] and steps[0][3]["state"] == 409 and steps[1][3]["tool_error"] is None
    assert steps[1][3]["subgoal"] == 1  # the wasted turn was turn 1: K in turn 2 is still within key_turns = 2
    assert steps[2][3]["tool_error"] and steps[3][3]["state"] == 410  # "RRR": the last letter is the action
    assert play(EX, ["xx", "yy", "K"])[2][3]["subgoal"] == 0  # K in turn 3: too late


def test_the_verifier_agrees_with_the_environment_on_every_letter_sequence():
    """Exhaustive over K L R O sequences up to the budget: score = the return of stepping the env."""
    for n in range(1, 7):
        for letters in itertools.product("KLRO", repeat=n):
            steps = play(EX, letters)
            ended = [s for s in steps if s[2]]
            env_return = sum(s[1] for s in steps[:steps.index(ended[0]) + 1]) if ended else 0.0
            assert TASK.score("".join(letters), EX) == env_return, letters


def test_without_the_key_the_reward_is_zero_whatever_follows():
    for letters in itertools.product("LRO", repeat=6):  # K never played
        assert TASK.score("".join(letters), EX) == 0.0
    for rest in itertools.product("KLRO", repeat=4):  # K only after the key window (turns 3+)
        assert TASK.score("LL" + "".join(rest), EX) == 0.0


def test_the_verifier_reads_a_transcript_with_its_observations():
    env = TASK.make_env()
    env.reset(EX, 0)
    transcript = ""
    for a in "KRRRO":
        obs, reward, done, _ = env.step(a)
        transcript += a + ("" if done else obs[0]["content"])
    assert transcript == "K\n409R\n410R\n411R\n412O" and TASK.score(transcript, EX) == reward == 1.0
    assert TASK.score(transcript.replace("K", ""), EX) == 0.0


def test_copy_gives_an_independent_environment_mid_episode():
    env = TASK.make_env()
    env.reset(EX, 0)
    env.step("K")
    env.step("R")
    twin = env.copy()
    assert twin.task is env.task and (twin.room, twin.key, twin.turns) == (410, True, 2)
    assert [twin.step(a)[1] for a in "RRO"] == [0.0, 0.0, 1.0]
    assert (env.room, env.key, env.turns) == (410, True, 2)  # the original did not move
    assert [env.step(a)[1:3] for a in "LRRR"] == [(0.0, False)] * 3 + [(0.0, True)]  # its own budget ran out
    assert replay(TASK, EX, 0, ["K", "R"]).__dict__.keys() == env.__dict__.keys()
    assert (replay(TASK, EX, 0, ["K", "R"]).room, replay(TASK, EX, 0, ["L", "R"]).key) == (410, False)


@pytest.mark.parametrize("kw", [{}, {"detour": 0.0, "skip": 0.0}, {"detour": 0.6, "skip": 0.6, "slack": 4},
                                {"min_length": 3, "max_length": 3, "slack": 1}, {"key_turns": 1, "skip": 0.0}])
def test_the_expert_always_picks_the_key_and_opens_the_door_within_the_budget(kw):
    task = get_task("keydoor", **kw)
    skipped = detoured = 0
    for ex in task.sample(100, random.Random(0)) + task.eval_set(50):
        budget, start, door = parse_answer(ex.answer)
        assert task.min_length <= door - start <= task.max_length and 100 <= start and door <= 999
        assert budget == door - start + 2 + task.slack and ex.prompt == f"D{door} {start}"
        actions = task.expert_actions(ex)
        assert actions == task.expert_actions(ex) and len(actions) <= budget  # deterministic per example
        steps = play(ex, actions, task)
        assert steps[-1][1:3] == (1.0, True) and not any(s[2] for s in steps[:-1])
        assert task.score("".join(actions), ex) == 1.0 == task.score(ex.target, ex)
        skipped += actions[0] != "K"
        detoured += len(actions) > door - start + 2 + (actions[0] != "K")
    assert (skipped > 0) == (task.skip > 0) and (detoured > 0) == (task.detour > 0)


def test_held_out_set_is_shipped_for_the_defaults_and_never_sampled_for_training():
    held_out = TASK.eval_set()
    assert len(held_out) == 200 and len({e.prompt for e in held_out}) == 200
    assert get_task("keydoor", detour=0.5, key_turns=3).eval_set() == held_out  # the expert / rules only
    train = {e.prompt for e in TASK.sample(2000, random.Random(1))}
    assert not train & {e.prompt for e in held_out}
    other = get_task("keydoor", max_length=6)
    assert other.eval_file is None and len(other.eval_set()) == 200 and other.eval_set() != held_out


def test_without_the_key_window_it_is_the_exact_credit_problem_of_advantages_exact():
    """With the key reachable all episode (key_turns = the budget), every (history, action) steps as
    `advantages.exact.keydoor_mdp` does: the same reward, end and observation (its cell = our room - start)."""
    from workbench.advantages.exact import keydoor_mdp

    mdp = keydoor_mdp(length=3, slack=1)
    task = get_task("keydoor", key_turns=6, skip=0.0)
    for history in mdp.histories():
        for a, letter in enumerate(mdp.actions):
            env = replay(task, EX, 0, [mdp.actions[h] for h in history])
            _, reward, done, info = env.step(letter)
            assert (reward, done, f"cell{info['state'] - 409}") == mdp.step(history, a), (history, letter)


@pytest.mark.parametrize("knobs", [{"key_turns": "two"}, {"min_length": 3.5}, {"skip": True}])
def test_knobs_of_the_wrong_type_are_refused(knobs):
    with pytest.raises(ValueError, match="keydoor: wrong type for"):
        get_task("keydoor", **knobs)
