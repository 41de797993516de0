"""The grid world: moves and walls, the goal reward within the budget, recurring position states, a hidden
map, and an imperfect expert that still always reaches the goal."""
import random
import re

import pytest

from workbench import registry
from workbench.envs.gridworld import GridworldEnv, distances, parse_map, shortest_moves, view
from workbench.tasks import Example, get_task

pytestmark = pytest.mark.covers("gridworld")

TASK = get_task("gridworld")
MAP = ["S.#", "..#", "G.."]
EX = Example("G20 " + view(MAP, (0, 0)), "4|S.#/..#/G..", "DD")  # budget 4, shortest path 2


def test_registered_as_task_and_env():
    assert registry.get("env", "gridworld").fn is type(TASK) and isinstance(TASK.make_env(), GridworldEnv)
    assert set(TASK.make_env().stop) == set("UDLR")
    with pytest.raises(ValueError, match="size"):
        get_task("gridworld", size=1)


def test_moves_walls_observations_and_rewards():
    assert parse_map(EX.answer) == (4, MAP, (0, 0), (2, 0)) and EX.prompt == "G20 00 #.#."
    env = GridworldEnv(TASK)
    messages, info = env.reset(EX, 0)
    assert messages[0]["content"] == EX.prompt and info["state"] == (0, 0)
    obs, r, done, info = env.step("U")  # into the edge: stays
    assert info["state"] == (0, 0) and obs[0]["content"] == "\n00 #.#." and (r, done) == (0.0, False)
    obs, r, done, info = env.step("R")
    assert info["state"] == (0, 1) and obs[0]["content"] == "\n01 #..#"  # U edge, D free, L start cell, R wall
    obs, r, done, info = env.step("xx")  # no move letter: a wasted turn
    assert info["tool_error"] and info["state"] == (0, 1) and not done
    obs, r, done, info = env.step("L")  # the 4th move: budget spent without reaching the goal
    assert (r, done) == (0.0, True)
    env.reset(EX, 0)
    assert [env.step(m)[1:3] for m in "DD"] == [(0.0, False), (1.0, True)]
    assert TASK.score("DD", EX) == 1.0 and TASK.score("RLDD", EX) == 1.0 and TASK.score("RLRDD", EX) == 0.0


def test_states_recur_within_an_episode_and_across_a_group():
    env = GridworldEnv(TASK)
    env.reset(EX, 0)
    states = [env.step(m)[3]["state"] for m in "RLR"]
    assert states == [(0, 1), (0, 0), (0, 1)]


@pytest.mark.parametrize("kw", [{}, {"size": 6, "walls": 10, "detour": 0.5}, {"detour": 0.0}])
def test_expert_reaches_the_goal_within_the_budget_and_detours_sometimes(kw):
    task = get_task("gridworld", **kw)
    detoured = 0
    for ex in task.sample(100, random.Random(0)) + task.eval_set(50):
        budget, rows, start, goal = parse_map(ex.answer)
        d = distances(rows, goal)[start]
        assert task.min_distance <= d <= task.max_distance and budget == d + task.slack and len(ex.target) == d
        assert ex.prompt == f"G{goal[0]}{goal[1]} {view(rows, start)}"  # the map itself is not shown
        actions = task.expert_actions(ex)
        assert actions == task.expert_actions(ex)  # deterministic per example
        env = task.make_env()
        env.reset(ex, 0)
        steps = [env.step(a) for a in actions]
        assert steps[-1][1:3] == (1.0, True) and not any(s[2] for s in steps[:-1])
        detoured += len(actions) > d
        assert task.score(ex.target, ex) == 1.0 and shortest_moves(rows, start, goal) == ex.target
    assert (detoured > 0) == (task.detour > 0)


def test_held_out_set_is_shipped_for_the_defaults_only():
    assert TASK.eval_file == "gridworld.jsonl" and get_task("gridworld", detour=0.5).eval_file == "gridworld.jsonl"
    other = get_task("gridworld", walls=3)
    assert other.eval_file is None and other.eval_set() and other.eval_set() != TASK.eval_set(len(other.eval_set()))


def test_without_neighbours_walls_are_found_by_bumping_into_them():
    task = get_task("gridworld", neighbours=False)
    assert all(re.fullmatch(r"G\d\d \d\d", e.prompt) for e in task.eval_set())  # "G34 00": goal, position
    env = GridworldEnv(task)
    env.reset(EX, 0)
    obs, _, _, info = env.step("R")
    assert obs[0]["content"] == "\n01" and info["state"] == (0, 1)
    assert env.step("R")[0][0]["content"] == "\n01"  # a wall: the same position comes back


@pytest.mark.parametrize("value", ["no", "false", 0, None])
def test_neighbours_must_be_a_bool_not_text_read_as_true(value):
    """`--set task_kw.neighbours=no` arrives as the text "no" (not JSON), which reads as true and quietly swapped
    the shipped held-out file for an in-memory draw: refused, whatever arrives that is not a bool."""
    with pytest.raises(ValueError, match=r"gridworld: wrong type for neighbours=.* \(\w+; need bool: true or false\)"):
        get_task("gridworld", neighbours=value)


def test_neighbours_no_from_the_command_line_is_refused():
    from workbench.train.config import apply_sets, make_config

    config = apply_sets(make_config(), ["task=gridworld", "task_kw.neighbours=no"])
    assert config.task_kw == {"neighbours": "no"}  # how it arrives: not JSON, so the text
    with pytest.raises(ValueError, match="neighbours='no'"):
        get_task(config.task, **config.task_kw)
    assert get_task("gridworld", **apply_sets(make_config(), ["task_kw.neighbours=false"]).task_kw).neighbours is False


@pytest.mark.parametrize("kw, message", [
    ({"walls": 34}, r"gridworld: walls=34 leaves 2 free cells on a 6x6 grid, but start and goal min_distance=6 moves "
                    r"apart need 7; at most walls=29 with size=6, min_distance=6"),
    ({"min_distance": 50, "max_distance": 60}, r"gridworld: walls=10 leaves 26 free cells on a 6x6 grid, but start and "
                                               r"goal min_distance=50 moves apart need 51; min_distance <= 25"),
    ({"min_distance": 50}, r"gridworld: need 1 <= min_distance <= max_distance, got min_distance=50, max_distance=10"),
    ({"walls": 29}, r"gridworld: only 0 of 500 random 6x6 maps with walls=29 put start and goal "
                    r"min_distance=6..max_distance=10 moves apart .*; use min_distance <= 2"),
    ({"min_distance": 12, "max_distance": 20}, r"only \d of 500 random 6x6 maps with walls=10 .*min_distance <= 11"),
    ({"size": 11}, r"gridworld: need 2 <= size <= 10"),
    ({"walls": -1, "slack": -1}, r"gridworld: need slack >= 0, got slack=-1"),
])
def test_maps_no_draw_can_satisfy_are_refused_before_generation_with_what_is_allowed(kw, message):
    """walls=34 on 6x6 (or min_distance=50) used to pass the constructor and then draw 10,000 maps per example
    before failing; now the constructor names what the grid allows (a path of d moves needs d + 1 free cells) or,
    past that, what a seeded probe of random maps reaches."""
    with pytest.raises(ValueError, match=message):
        get_task("gridworld", **kw)


def test_the_distances_a_refusal_allows_are_accepted():
    task = get_task("gridworld", walls=29, min_distance=2)  # what the walls=29 refusal says
    assert task.eval_set(4) and task.sample(4, random.Random(0))
