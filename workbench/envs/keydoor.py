"""Key and door: an early action decides a late reward, and the observation does not show it.

The agent stands in a corridor of numbered rooms beside a key; the door is at the corridor's right end. Picking
the key up ("K") works only in the first `key_turns` turns and only in the start room; the door opens ("O",
reward 1, the episode ends) only at the door and only with the key. Without the key nothing the agent does
afterwards earns anything: reward 0 when the example's budget runs out. Format, e.g. door in room 412, agent in 408:
    prompt        "D412 408"     the door's room, then the first observation (the agent's room)
    action        "K"            one letter: K (pick up the key), L / R (walk), O (open); every letter is a stop string
    observation   "\n408"        the agent's room, nothing else
    ...           "R" "\n409" "R" "\n410" "R" "\n411" "R" "\n412" "O"  -> reward 1
The observation is the room only, never whether the key is held: the same observation recurs with and without
the key (rows of one group reach room 410 both ways, with different values), the context inconsistency GiGPO's
anchor states and HGPO's context groups are about; the policy still sees its own earlier actions. A move into
the wall behind the start (L there) or past the door leaves the agent where it is; an action without an action
letter is a wasted turn (info["tool_error"]). The budget is the corridor length + 2 (K and O) + `slack`. Room
numbers run from 100 to 999, so prompts are many (a held-out set of 200 never met in training) while every
example's state space stays tiny: (length + 1) rooms x key flag x turns, small enough to enumerate.

info per state: "state" = the room (the anchor), "subgoal" = 0 before the key is picked up, 1 after (HiPER's
windows), "tool_error". The expert always picks the key (it must solve) but is noisy: with probability `skip` it
first bumps into the wall behind the start (again with probability `skip`, at most key_turns - 1 times, so the
key stays within reach), and with probability `detour` per move it steps back first (while the budget still
reaches the door). The warm-started policy so sometimes delays the key and, sampled from, sometimes loses it.
"""
from __future__ import annotations

import hashlib
import random

from workbench import registry
from workbench.envs.base import Env, check_knob_rules, check_knob_types, knob_kinds, tool, user
from workbench.tasks.base import Example, Task

KEY, OPEN, MOVES = "K", "O", {"L": -1, "R": 1}
DISTRACTORS = "WXYZ"   # letters that do nothing (knob `distractors`): a larger action set for random policies
LOWEST_ROOM, HIGHEST_ROOM = 100, 999


def parse_answer(answer: str) -> tuple[int, int, int]:
    """(budget, start room, door room) from an example's answer "budget|start|door"."""
    budget, start, door = (int(x) for x in answer.split("|"))
    return budget, start, door


def walked(start: int, door: int, room: int, move: str) -> int:
    """The room after `move`; the corridor is the rooms from the start to the door, walls beyond both."""
    return min(max(room + MOVES[move], start), door)


@registry.env(
    "keydoor", title="Key and door: an early action decides a late reward", family="canonical",
    summary="Pick up a key in the first turn(s) ('K'), walk a corridor of numbered rooms ('L'/'R'), open the door "
            "('O'): reward 1 only with the key. Observations show the room only, so states recur with and "
            "without the key. State = room.")
class KeydoorTask(Task):
    """A corridor of min_length..max_length rooms from a start beside the key to the door on its right.

    Knobs (`task_kw`): min_length (3), max_length (5): walks to the door; slack (turns beyond the shortest
    episode K + walk + O, 2); key_turns (the key can be picked up only in the first key_turns turns, 2); the
    expert's noise: skip (probability of each wasted turn before the key, at most key_turns - 1 of them, 0.5;
    needs key_turns >= 2 and slack >= 1) and detour (probability per move of a step back first, 0.2);
    distractors (0..4 extra action letters W X Y Z that do nothing, 0). Held-out set: data/eval/keydoor.jsonl
    (min_length, max_length, slack at the defaults; the other knobs change the rules or the expert only).

    Measured (tiny model, seed 0, 200 held-out episodes, defaults): after a 30-step SFT warm start greedy 0.995,
    sampled (temperature 1, 4 samples) 0.48, the key picked up in 85% of the sampled episodes; after 60 steps
    0.94 / 0.54 / 98%.
    """

    name = "keydoor"
    DEFAULTS = {"min_length": 3, "max_length": 5, "slack": 2}  # what the examples depend on

    def __init__(self, *, min_length: int = 3, max_length: int = 5, slack: int = 2, key_turns: int = 2,
                 skip: float = 0.5, detour: float = 0.2, distractors: int = 0):
        check_knob_types("keydoor", locals(), knob_kinds(KeydoorTask))
        check_knob_rules("keydoor", [
            (not 3 <= min_length <= max_length <= 20,
             f"3 <= min_length <= max_length <= 20 (the walk takes >= 3 moves), got {min_length}, {max_length}"),
            (slack < 0, f"slack >= 0, got {slack}"),
            (key_turns < 1, f"key_turns >= 1 (the key must be reachable), got {key_turns}"),
            (not 0 <= skip < 1, f"0 <= skip < 1, got {skip}"),
            (skip > 0 and (key_turns < 2 or slack < 1),
             (f"skip > 0 only with key_turns >= 2 and slack >= 1 (a skipped turn must leave the key reachable and "
              f"the door within the budget), got skip={skip}, key_turns={key_turns}, slack={slack}")),
            (not 0 <= detour < 1, f"0 <= detour < 1, got {detour}"),
            (not 0 <= distractors <= len(DISTRACTORS), f"0 <= distractors <= {len(DISTRACTORS)}, got {distractors}"),
        ])
        self.min_length, self.max_length, self.slack, self.key_turns = min_length, max_length, slack, key_turns
        self.skip, self.detour, self.distractors = skip, detour, distractors
        self.actions = (KEY, *MOVES, OPEN, *DISTRACTORS[:distractors])
        self.max_turns = max_length + 2 + slack  # the longest example's budget
        params = {"min_length": min_length, "max_length": max_length, "slack": slack}
        self.eval_file = "keydoor.jsonl" if params == self.DEFAULTS else None  # see AdditionTask

    def make_example(self, rng: random.Random) -> Example:
        length = rng.randint(self.min_length, self.max_length)
        start = rng.randint(LOWEST_ROOM, HIGHEST_ROOM - length)
        door = start + length
        return Example(prompt=f"D{door} {start}", answer=f"{length + 2 + self.slack}|{start}|{door}",
                       target=KEY + "R" * length + OPEN)

    def score(self, completion: str, example: Example) -> float:
        """Replay the action letters of `completion` (one turn each, everything else ignored: the observations
        are digits) through the environment: 1 iff the door opens within the budget."""
        env = self.make_env()
        env.reset(example)
        for letter in (ch for ch in completion if ch in self.actions):
            _, reward, done, _ = env.step(letter)
            if done:
                return reward
        return 0.0

    def expert_actions(self, example: Example) -> list[str]:
        """K, the walk, O; with probability `skip` a bump into the wall behind the start before K (again with
        probability `skip`, up to key_turns - 1 bumps: K stays within reach), and with probability `detour` per
        move a step back first, while the budget still reaches the door. Seeded by the example: the same example
        always gets the same actions."""
        budget, start, door = parse_answer(example.answer)
        rng = random.Random(hashlib.sha256(example.answer.encode()).hexdigest())
        spare = budget - (door - start) - 2  # turns the noise may spend
        actions = []
        while len(actions) < self.key_turns - 1 and spare >= 1 and rng.random() < self.skip:
            actions.append("L")  # the wall behind the start: the agent stays beside the key
            spare -= 1
        actions.append(KEY)
        room = start
        while room != door:
            cost = 1 if room == start else 2  # a bump costs its turn; a real step back also one more step ahead
            if spare >= cost and rng.random() < self.detour:
                actions.append("L")
                room, spare = walked(start, door, room, "L"), spare - cost
            actions.append("R")
            room = walked(start, door, room, "R")
        return actions + [OPEN]

    def make_env(self) -> KeydoorEnv:
        return KeydoorEnv(self)

    def __repr__(self) -> str:
        return (f"KeydoorTask(min_length={self.min_length}, max_length={self.max_length}, slack={self.slack}, "
                f"key_turns={self.key_turns}, skip={self.skip}, detour={self.detour}, "
                f"distractors={self.distractors})")


class KeydoorEnv(Env):
    """One episode of a KeydoorTask example; the state is the room (not the key, which `subgoal` reports)."""

    subgoals = True  # info["subgoal"]: 0 before the key, 1 after (HiPER's windows)

    def __init__(self, task: KeydoorTask):
        self.task = task
        self.stop = task.actions  # every action letter ends a turn
        self.max_turns = task.max_turns  # the rollout's cap; each example ends at its own budget
        self.budget, self.start, self.door, self.room, self.key, self.turns = 0, None, None, None, False, 0

    def reset(self, example: Example, seed: int | None = None):
        self.budget, self.start, self.door = parse_answer(example.answer)
        self.room, self.key, self.turns = self.start, False, 0
        return [user(example.prompt)], self.info()

    def actions(self) -> list[str]:
        """Every action this environment tells apart (random-policy rollouts draw from these)."""
        return list(self.task.actions)

    def info(self, error: str | None = None) -> dict:
        return {"state": self.room, "subgoal": int(self.key), "tool_error": error}

    def step(self, action: str):
        if self.room is None:
            raise RuntimeError("step before reset")
        letter = action[-1:] if action[-1:] in self.task.actions else None
        opened = False
        if letter == KEY:
            self.key |= self.turns < self.task.key_turns and self.room == self.start
        elif letter in MOVES:
            self.room = walked(self.start, self.door, self.room, letter)
        elif letter == OPEN:
            opened = self.key and self.room == self.door
        self.turns += 1
        done = opened or self.turns >= self.budget
        error = None if letter else f"no action letter ({' '.join(self.task.actions)})"
        return [tool(f"\n{self.room}")], float(opened), done, self.info(error)
