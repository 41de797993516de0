"""ACT's critic task: pick the expert's move among two, in states of the grid world's expert paths.

Agentic Critical Training pairs, in states of expert trajectories, the expert's action a* with an alternative a'
and trains the policy to say which is better (`workbench.rewards.act`). Here the trajectories are shortest paths
of `GridworldTask` maps (its expert without detours) and a' is a strictly worse move from the same cell (one that
does not bring the agent closer to the goal: away from it, or into a wall); the paper samples a' from the initial
policy instead, a stand-in at toy scale. Format, e.g. goal at row 3 column 4, agent at 0 1:
    prompt   "G34 01 #..# A:U B:R"    the state as the grid world shows it (goal, position, what is Up Down Left
                                      Right), then the two candidates in random order
    target   "B"                      the label of the expert's move; the verifier is `parse_choice` == answer
The alternative comes from the map, which the prompt does not show (walls beyond the neighbours), so a judge
learns the usual case (towards the goal, not into a wall) and stays below 1 where the map decides.
"""
from __future__ import annotations

import random

from workbench import registry
from workbench.envs.base import check_knob_types, knob_kinds
from workbench.envs.gridworld import GridworldTask, check_map_knobs, distances, moved, parse_map, view
from workbench.rewards.act import CriticPair, critic_pairs, parse_choice, present
from workbench.tasks.base import Example, Task, redraw

MAP_TRIES = 1000  # maps per example at most; a map's expert path has a state with a worse move almost always


@registry.env(
    "act", title="Agentic Critical Training's critic task: the expert's move among two, on grid-world states",
    summary="Given a grid-world state and two candidate moves (the expert's and a worse one), answer the label of "
            "the expert's; reward 1 iff right.")
class ACTTask(Task):
    """Critic pairs from `GridworldTask(size, walls, min_distance, max_distance, detour=0)` maps.

    Knobs (`task_kw`): size (6), walls (10), min_distance (6), max_distance (10), as the grid world's. Held-out
    set: data/eval/act.jsonl (drawn by `make_eval`; other parameters draw theirs in memory).
    """

    name = "act"
    DEFAULTS = {"size": 6, "walls": 10, "min_distance": 6, "max_distance": 10}

    def __init__(self, *, size: int = 6, walls: int = 10, min_distance: int = 6, max_distance: int = 10):
        check_knob_types("act", locals(), knob_kinds(ACTTask))
        check_map_knobs("act", size, walls, min_distance, max_distance)  # the grid world's rules, in ACT's name
        self.world = GridworldTask(size=size, walls=walls, min_distance=min_distance, max_distance=max_distance,
                                   detour=0.0)
        params = {"size": size, "walls": walls, "min_distance": min_distance, "max_distance": max_distance}
        self.eval_file = "act.jsonl" if params == self.DEFAULTS else None  # see AdditionTask

    def expert_pairs(self, example: Example, rng: random.Random) -> list[CriticPair]:
        """One pair per state of the map's expert path: (state text, expert move, a worse move at random)."""
        _, rows, pos, goal = parse_map(example.answer)
        dist = distances(rows, goal)
        states, experts, alternatives = [], [], []
        for move in self.world.expert_actions(example):
            worse = [m for m in "UDLR" if dist.get(moved(rows, pos, m), -1) != dist[pos] - 1]
            states.append(f"G{goal[0]}{goal[1]} {view(rows, pos)}")
            experts.append(move)
            alternatives.append(rng.choice(worse) if worse else move)  # no worse move: filtered out
            pos = moved(rows, pos, move)
        return critic_pairs(states, experts, alternatives)

    def make_example(self, rng: random.Random) -> Example:
        pairs = redraw(lambda: self.expert_pairs(self.world.make_example(rng), rng) or None, MAP_TRIES,
                       f"{self!r}: no map with a worse move on its expert path within {MAP_TRIES} draws")
        pair = rng.choice(pairs)
        (first, second), label = present(pair, rng)
        return Example(prompt=f"{pair.state} A:{first} B:{second}", answer=label, target=label)

    def score(self, completion: str, example: Example) -> float:
        return 1.0 if parse_choice(completion) == example.answer else 0.0

    def __repr__(self) -> str:
        w = self.world
        return (f"ACTTask(size={w.size}, walls={w.walls}, min_distance={w.min_distance}, "
                f"max_distance={w.max_distance})")
