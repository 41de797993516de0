"""ACT's critic task: grid-world states of expert paths, the expert's move against a worse one, random order."""
import random
import re

import pytest

from workbench.envs.gridworld import distances, moved, parse_map
from workbench.rewards.act import act_reward
from workbench.tasks import get_task

pytestmark = pytest.mark.covers("act")

PROMPT = re.compile(r"G(\d)(\d) (\d)(\d) ([.#G]{4}) A:([UDLR]) B:([UDLR])")


@pytest.fixture(scope="module")
def task():
    return get_task("act")


def test_every_state_of_a_path_gives_a_pair_with_the_experts_move_and_a_worse_one(task):
    rng = random.Random(0)
    for _ in range(30):
        example = task.world.make_example(rng)
        _, rows, pos, goal = parse_map(example.answer)
        dist = distances(rows, goal)
        pairs = task.expert_pairs(example, rng)
        assert 0 < len(pairs) <= dist[pos]
        for pair in pairs:
            r, c = int(pair.state[4]), int(pair.state[5])
            assert pair.state.startswith(f"G{goal[0]}{goal[1]} ")
            assert dist[moved(rows, (r, c), pair.expert)] == dist[(r, c)] - 1         # a shortest-path move
            assert dist.get(moved(rows, (r, c), pair.alternative), -1) != dist[(r, c)] - 1  # strictly worse
            assert pair.alternative != pair.expert


def test_examples_show_the_state_and_both_moves_and_answer_the_experts_label(task):
    examples = task.sample(400, random.Random(1))
    labels = [e.answer for e in examples]
    assert set(labels) == {"A", "B"} and 0.4 < labels.count("A") / len(labels) < 0.6
    for e in examples:
        assert PROMPT.fullmatch(e.prompt), e.prompt
        assert e.target == e.answer and task.score(e.target, e) == 1.0
        assert task.score("B" if e.answer == "A" else "A", e) == 0.0
    # the verifier and the reward function agree
    completions = [random.Random(i).choice(["A", "B", "Answer: A", "?"]) for i in range(len(examples))]
    assert act_reward(completions, answer=labels) == [task.score(c, e) for c, e in zip(completions, examples)]


def test_held_out_set_is_shipped_and_sampling_avoids_it(task):
    held_out = task.eval_set()
    assert len(held_out) == 200 and len({e.prompt for e in held_out}) == 200
    assert all(task.score(e.target, e) == 1.0 for e in held_out)
    assert not {e.prompt for e in held_out} & {e.prompt for e in task.sample(500, random.Random(2))}
    assert get_task("act", size=5).eval_file is None


@pytest.mark.parametrize("kw, message", [
    ({"walls": 34}, r"act: walls=34 leaves 2 free cells on a 6x6 grid, .*at most walls=29"),
    ({"min_distance": 50, "max_distance": 60}, r"act: walls=10 leaves 26 free cells .*need 51"),
    ({"walls": 29}, r"act: only 0 of 500 random 6x6 maps with walls=29 .*use min_distance <= 2"),
    ({"size": "6"}, r"act: wrong type for size='6' \(str; need int\)"),
    ({"slack": 2}, r"act: unknown task_kw key 'slack'; act's knobs: size, walls, min_distance, max_distance"),
])
def test_map_knobs_are_checked_as_the_grid_worlds_in_acts_name(kw, message):
    with pytest.raises(ValueError, match=message):
        get_task("act", **kw)
