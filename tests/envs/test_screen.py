"""The text screen: clicks focus, typing fills the focused field, submit ends the episode and is scored exactly;
the screen's text as the state, subgoal windows per field, a noisy expert that always solves, independent copies."""
import itertools
import random

import pytest

from workbench import registry
from workbench.envs.screen import ScreenEnv, parse_answer, render, solution
from workbench.episodes import replay
from workbench.tasks import Example, get_task

pytestmark = pytest.mark.covers("screen")

TASK = get_task("screen")
EX = Example("N=b A=d 1N_ 2S 3A_", "7|NSA|Nb,Ad", "C1TbC3TdC2")  # budget 2 x 2 + 1 + slack 2


def play(example, actions, task=TASK):
    env = task.make_env()
    env.reset(example, 0)
    return [env.step(a) for a in actions]


def test_registered_as_task_and_env_with_every_action_ending_in_a_stop_string():
    assert registry.get("env", "screen").fn is type(TASK) and isinstance(TASK.make_env(), ScreenEnv)
    env = TASK.make_env()
    assert env.actions() == ["C1", "C2", "C3", "Ta", "Tb", "Tc", "Td"]
    assert set(env.stop) == {a[-1] for a in env.actions()} and TASK.max_turns == 7
    assert TASK.eval_file == "screen.jsonl" and get_task("screen", shuffle=True).eval_file is None


@pytest.mark.parametrize("kw, match", [({"fields": 1}, "fields"), ({"fields": 4}, "fields"), ({"vocab": 1}, "vocab"),
                                       ({"vocab": 9}, "vocab"), ({"slack": -1}, "slack"), ({"detour": 1.0}, "detour")])
def test_knobs_are_validated_with_clear_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        get_task("screen", **kw)


def test_clicks_focus_typing_fills_and_submit_scores():
    steps = play(EX, ["C1", "Tb", "C3", "Td", "C2"])
    screens = ["1N_* 2S 3A_", "1Nb* 2S 3A_", "1Nb 2S 3A_*", "1Nb 2S 3Ad*"]
    assert [s[0][0]["content"] for s in steps[:4]] == ["\n" + text for text in screens]
    assert [s[3]["state"] for s in steps[:4]] == screens
    assert [s[1:3] for s in steps] == [(0.0, False)] * 4 + [(1.0, True)]
    assert all(s[3]["tool_error"] is None for s in steps)
    assert play(EX, ["C1", "Tb", "C2"])[-1][1:3] == (0.0, True)  # submitted with A empty: ends, unsolved
    assert play(EX, ["C1", "Tb", "C3", "Tc", "C2"])[-1][1:3] == (0.0, True)  # a wrong value
    assert play(EX, ["C1", "Ta", "Tb", "C3", "Td", "C2"])[-1][1:3] == (1.0, True)  # typing replaces


def test_subgoal_counts_the_fields_holding_their_instructed_value():
    env = TASK.make_env()
    _, info = env.reset(EX, 0)
    assert info == {"state": "1N_ 2S 3A_", "subgoal": 0, "tool_error": None}
    assert [env.step(a)[3]["subgoal"] for a in ["C1", "Tb", "C3", "Tc", "Td", "C1", "Ta"]] == [0, 1, 1, 1, 2, 2, 1]


def test_errors_waste_a_turn_and_the_budget_ends_the_episode():
    steps = play(EX, ["Tb", "C7", "xx", "Tz", "C1", "Tb", "C3"])
    assert [bool(s[3]["tool_error"]) for s in steps] == [True, True, True, True, False, False, False]
    assert "focus" in steps[0][3]["tool_error"] and "no element 7" in steps[1][3]["tool_error"]
    assert [s[2] for s in steps] == [False] * 6 + [True] and steps[-1][1] == 0.0  # 7 turns: the budget
    assert play(EX, ["xxC1"])[0][3]["state"] == "1N_* 2S 3A_"  # the last two characters are the action


def test_the_verifier_agrees_with_the_environment_on_every_action_sequence():
    """Exhaustive over the 7 actions up to 4 turns, and the expert-length prefix of longer ones."""
    actions = TASK.make_env().actions()
    for n in range(1, 5):
        for seq in itertools.product(actions, repeat=n):
            steps = play(EX, seq)
            ended = next((k for k, s in enumerate(steps) if s[2]), None)
            env_return = steps[ended][1] if ended is not None else 0.0
            assert TASK.score("".join(seq), EX) == env_return, seq
    for seq in [["C1", "Tb", "C3", "Td", "C2"], ["C3", "Td", "C1", "Tb", "C2"], ["C1", "Tb", "C1", "Td", "C2"]]:
        assert TASK.score("".join(seq), EX) == play(EX, seq)[-1][1]


def test_the_verifier_reads_a_transcript_with_its_screens():
    env = TASK.make_env()
    env.reset(EX, 0)
    transcript = ""
    for a in ["C1", "Tb", "C3", "Td", "C2"]:
        obs, reward, done, _ = env.step(a)
        transcript += a + ("" if done else obs[0]["content"])
    assert transcript == "C1\n1N_* 2S 3A_Tb\n1Nb* 2S 3A_C3\n1Nb 2S 3A_*Td\n1Nb 2S 3Ad*C2"
    assert TASK.score(transcript, EX) == reward == 1.0 and TASK.score(transcript.replace("Td", "Tc"), EX) == 0.0


def test_copy_gives_an_independent_environment_mid_episode():
    env = TASK.make_env()
    env.reset(EX, 0)
    env.step("C1")
    env.step("Tb")
    twin = env.copy()
    assert twin.task is env.task and twin.screen() == env.screen() == "1Nb* 2S 3A_"
    assert [twin.step(a)[1] for a in ["C3", "Td", "C2"]] == [0.0, 0.0, 1.0]
    assert env.screen() == "1Nb* 2S 3A_" and env.turns == 2 and env.values == {"N": "b", "A": "_"}
    assert env.step("C2")[1:3] == (0.0, True)  # the original submits its own, unfinished form
    assert replay(TASK, EX, 0, ["C1", "Tb", "C3"]).screen() == "1Nb 2S 3A_*"


@pytest.mark.parametrize("kw", [{}, {"detour": 0.0}, {"detour": 0.7, "slack": 4}, {"fields": 3, "vocab": 6},
                                {"shuffle": True}, {"slack": 0}])
def test_the_expert_fills_every_field_and_submits_within_the_budget(kw):
    task = get_task("screen", **kw)
    detoured = 0
    for ex in task.sample(100, random.Random(0)) + task.eval_set(50):
        budget, layout, instruction = parse_answer(ex.answer)
        assert budget == task.max_turns and sorted(layout) == sorted([label for label, _ in instruction] + ["S"])
        if not task.shuffle:  # the fields in the instruction's order, submit anywhere
            assert layout.replace("S", "") == "".join(label for label, _ in instruction)
        screen = render(layout, {label: "_" for label, _ in instruction}, None)
        assert ex.prompt == " ".join(f"{label}={value}" for label, value in instruction) + " " + screen
        actions = task.expert_actions(ex)
        assert actions == task.expert_actions(ex) and len(actions) <= budget  # deterministic per example
        steps = play(ex, actions, task)
        assert steps[-1][1:3] == (1.0, True) and not any(s[2] for s in steps[:-1])
        subgoals = [s[3]["subgoal"] for s in steps]
        assert subgoals == sorted(subgoals)  # the expert never undoes a field: one window per field
        assert task.score("".join(actions), ex) == 1.0 == task.score(ex.target, ex)
        assert ex.target == "".join(solution(layout, instruction))
        detoured += len(actions) > 2 * task.fields + 1
    assert (detoured > 0) == (task.detour > 0 and task.slack > 0)


def test_held_out_set_is_shipped_for_the_defaults_and_never_sampled_for_training():
    held_out = TASK.eval_set()
    assert len(held_out) == 200 and len({e.prompt for e in held_out}) == 200
    assert get_task("screen", detour=0.5).eval_set() == held_out  # the expert's noise only
    train = {e.prompt for e in TASK.sample(2000, random.Random(1))}
    assert not train & {e.prompt for e in held_out}
    other = get_task("screen", shuffle=True)
    assert len(other.eval_set()) == 200 and other.eval_set() != held_out


@pytest.mark.parametrize("knobs", [{"shuffle": "no"}, {"fields": "3"}, {"detour": None}])
def test_knobs_of_the_wrong_type_are_refused(knobs):
    with pytest.raises(ValueError, match="screen: wrong type for"):
        get_task("screen", **knobs)
