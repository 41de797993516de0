"""A text grid world: reach the goal within a turn budget; positions repeat, so states recur across a group.

The map is hidden: the agent knows where the goal is and sees only its own cell's neighbours, so walls are
discovered by walking into them (partial observability: the policy cannot plan around walls it has not seen).
Format, e.g. goal at row 3 column 4, start at 0 0:
    prompt        "G34 00 #..#"      the goal, then the first observation
    action        "R"                one move U/D/L/R (every move letter is a stop string)
    observation   "\n01 #..#"        row and column, then what is Up, Down, Left, Right of the agent
                                     ("#" wall or edge, "." free, "G" goal)
so a transcript reads one line per step: position, neighbours, move. A move into a wall or off the grid leaves
the agent where it is; an action without a move letter is a wasted turn (info["tool_error"]). Reward 1 on
reaching the goal (the episode ends), 0 when the example's budget of moves (shortest path + `slack`) runs
out. The state is the agent's position: trajectories of one group revisit the same positions, the anchor
states GiGPO groups steps by. The map rides in the example's answer ("budget|rows joined by /"). The expert
knows the map and follows a shortest path but, with probability `detour`, takes a random other move first
(while the budget still allows reaching the goal); imitating it from local views is imperfect, which leaves
RL room to improve.
"""
from __future__ import annotations

import functools
import hashlib
import random
from collections import Counter, deque

from workbench import registry
from workbench.envs.base import Env, check_knob_rules, check_knob_types, knob_kinds, tool, user
from workbench.tasks.base import PROBE_SEED, Example, Task, redraw

MOVES = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}
MAX_SIZE = 10  # positions are shown as one digit per coordinate
MAP_TRIES = 10_000  # maps drawn per example at most (the knobs are refused unless MIN_HITS of PROBE_MAPS qualify)
PROBE_MAPS, MIN_HITS = 500, 10  # a map qualifies 2% of the time or more, so an example takes <= ~50 draws


def parse_map(answer: str) -> tuple[int, list[str], tuple[int, int], tuple[int, int]]:
    """(budget, rows, start, goal) from an example's answer "budget|row/row/...", rows with "S" and "G"."""
    budget, grid = answer.split("|")
    rows = grid.split("/")
    find = lambda ch: next((r, row.index(ch)) for r, row in enumerate(rows) if ch in row)  # noqa: E731
    return int(budget), rows, find("S"), find("G")


def free(rows: list[str], pos: tuple[int, int]) -> bool:
    r, c = pos
    return 0 <= r < len(rows) and 0 <= c < len(rows[0]) and rows[r][c] != "#"


def moved(rows: list[str], pos: tuple[int, int], move: str) -> tuple[int, int]:
    """The position after `move` (unchanged when blocked)."""
    dr, dc = MOVES[move]
    nxt = (pos[0] + dr, pos[1] + dc)
    return nxt if free(rows, nxt) else pos


def view(rows: list[str], pos: tuple[int, int], neighbours: bool = True) -> str:
    """Row, column and the four neighbours U D L R: "12 .#G." (without neighbours: "12")."""
    if not neighbours:
        return f"{pos[0]}{pos[1]}"
    cells = []
    for move in "UDLR":
        nxt = (pos[0] + MOVES[move][0], pos[1] + MOVES[move][1])
        cells.append("#" if not free(rows, nxt) else "G" if rows[nxt[0]][nxt[1]] == "G" else ".")
    return f"{pos[0]}{pos[1]} {''.join(cells)}"


def distances(rows: list[str], goal: tuple[int, int]) -> dict:
    """BFS distance to the goal from every free cell that reaches it."""
    dist = {goal: 0}
    queue = deque([goal])
    while queue:
        pos = queue.popleft()
        for move in MOVES:
            nxt = (pos[0] + MOVES[move][0], pos[1] + MOVES[move][1])
            if free(rows, nxt) and nxt not in dist:
                dist[nxt] = dist[pos] + 1
                queue.append(nxt)
    return dist


def shortest_moves(rows, start, goal) -> str:
    """One shortest path as move letters (ties broken in U D L R order)."""
    dist, pos, path = distances(rows, goal), start, []
    while pos != goal:
        move = next(m for m in "UDLR" if dist.get(moved(rows, pos, m), -1) == dist[pos] - 1)
        path.append(move)
        pos = moved(rows, pos, move)
    return "".join(path)


def draw_map(rng: random.Random, size: int, walls: int):
    """One random map: (rows with "S" and "G", start, goal, the start's distance to the goal or None)."""
    cells = [(r, c) for r in range(size) for c in range(size)]
    picked = rng.sample(cells, walls + 2)
    start, goal, blocked = picked[0], picked[1], set(picked[2:])
    rows = ["".join("#" if (r, c) in blocked else "S" if (r, c) == start else "G" if (r, c) == goal
                    else "." for c in range(size)) for r in range(size)]
    return rows, start, goal, distances(rows, goal).get(start)


@functools.lru_cache(maxsize=256)
def probe_maps(size: int, walls: int, min_distance: int, max_distance: int) -> tuple[int, int, tuple]:
    """(maps drawn, how many put start and goal min..max_distance moves apart, the distances seen as sorted
    (distance, count) pairs, None for no path) of up to PROBE_MAPS seeded random maps, stopping at MIN_HITS."""
    rng, seen, hits, drawn = random.Random(PROBE_SEED), Counter(), 0, 0
    while drawn < PROBE_MAPS and hits < MIN_HITS:
        d = draw_map(rng, size, walls)[3]
        drawn, hits = drawn + 1, hits + (d is not None and min_distance <= d <= max_distance)
        seen[d] += 1
    return drawn, hits, tuple(sorted(seen.items(), key=lambda kv: -1 if kv[0] is None else kv[0]))


def check_map_knobs(task: str, size, walls, min_distance, max_distance) -> None:
    """Refuse map knobs no map (or too few random maps) can satisfy, before anything is drawn: the grid's limits,
    the free cells a path of min_distance moves needs, then a seeded probe of random maps (shared by the grid world
    and ACT's critic task, `task` names which in the message)."""
    cells = size * size if isinstance(size, int) and 2 <= size <= MAX_SIZE else None
    check_knob_rules(task, [
        (cells is None, f"2 <= size <= {MAX_SIZE} (positions are one digit per coordinate), got size={size}"),
        (walls < 0, f"walls >= 0, got walls={walls}"),
        (not 1 <= min_distance <= max_distance,
         f"1 <= min_distance <= max_distance, got min_distance={min_distance}, max_distance={max_distance}"),
    ])
    free_cells = cells - walls
    if min_distance + 1 > free_cells:
        most_walls, most_distance = cells - min_distance - 1, free_cells - 1
        ways = ([f"at most walls={most_walls} with size={size}, min_distance={min_distance}"] if most_walls >= 0
                else []) + ([f"min_distance <= {most_distance} with walls={walls}"] if most_distance >= 1 else [])
        raise ValueError(
            f"{task}: walls={walls} leaves {max(free_cells, 0)} free cells on a {size}x{size} grid, but start and goal "
            f"min_distance={min_distance} moves apart need {min_distance + 1}; "
            + (" or ".join(ways) if ways else "raise size or lower walls"))
    drawn, hits, seen = probe_maps(size, walls, min_distance, max_distance)
    if hits < MIN_HITS:
        reached_ = [d for d, _ in seen if d is not None]
        span = f"distances seen: {min(reached_)}..{max(reached_)}" if reached_ else "none had a path"
        within = [lo for lo in range(1, min(max(reached_, default=0), max_distance) + 1)
                  if sum(n for d, n in seen if d is not None and lo <= d <= max_distance) >= MIN_HITS]
        fix = (f"use min_distance <= {max(within)} (with max_distance={max_distance})" if within
               else "use fewer walls" + (" or a larger max_distance" if reached_ and max(reached_) > max_distance
                                         else ""))
        raise ValueError(
            f"{task}: only {hits} of {drawn} random {size}x{size} maps with walls={walls} put start and goal "
            f"min_distance={min_distance}..max_distance={max_distance} moves apart ({span}; at least {MIN_HITS} are "
            f"needed, or drawing examples takes too long); {fix}")


def reached(rows, start, goal, moves: str, max_turns: int) -> bool:
    pos = start
    for move in [m for m in moves if m in MOVES][:max_turns]:
        pos = moved(rows, pos, move)
        if pos == goal:
            return True
    return False


@registry.env(
    "gridworld", title="Grid world: reach the goal by moves, with recurring states", family="canonical",
    summary="Move U/D/L/R on a walled grid shown in the prompt, one move per turn with the new position and "
            "neighbourhood observed; reward 1 on reaching the goal within max_turns. State = position.")
class GridworldTask(Task):
    """A size x size grid with `walls` random walls, start and goal min_distance..max_distance moves apart.

    Knobs (`task_kw`): size (6), walls (10), min_distance (6), max_distance (10), slack (turns beyond the
    shortest path, 2), detour (the expert's probability of a random move, 0.25), neighbours (observations show
    the four neighbouring cells, True; False: the position only, walls are found by bumping into them).
    Refused when built (`check_map_knobs`): fewer free cells than a path of min_distance moves needs, and
    distances fewer than 2% of random maps put start and goal at (the message names the distances they reach).
    """

    name = "gridworld"
    DEFAULTS = {"size": 6, "walls": 10, "min_distance": 6, "max_distance": 10, "slack": 2, "detour": 0.25,
                "neighbours": True}

    def __init__(self, *, size: int = 6, walls: int = 10, min_distance: int = 6, max_distance: int = 10,
                 slack: int = 2, detour: float = 0.25, neighbours: bool = True):
        check_knob_types("gridworld", locals(), knob_kinds(GridworldTask))  # neighbours="no" is not False
        check_knob_rules("gridworld", [(slack < 0, f"slack >= 0, got slack={slack}"),
                                       (not 0 <= detour < 1, f"0 <= detour < 1, got detour={detour}")])
        check_map_knobs("gridworld", size, walls, min_distance, max_distance)
        self.size, self.walls, self.slack, self.detour = size, walls, slack, detour
        self.min_distance, self.max_distance, self.neighbours = min_distance, max_distance, neighbours
        params = {"size": size, "walls": walls, "min_distance": min_distance, "max_distance": max_distance,
                  "slack": slack, "detour": detour, "neighbours": neighbours}
        # The shipped held-out file was drawn with the defaults (detour only changes the expert); see AdditionTask.
        same = all(params[k] == v for k, v in self.DEFAULTS.items() if k != "detour")
        self.eval_file = "gridworld.jsonl" if same else None

    def qualifying_map(self, rng: random.Random):
        """A random map whose start is min..max_distance moves from the goal, or None."""
        rows, start, goal, d = draw_map(rng, self.size, self.walls)
        return (rows, start, goal, d) if d is not None and self.min_distance <= d <= self.max_distance else None

    def make_example(self, rng: random.Random) -> Example:
        rows, start, goal, d = redraw(lambda: self.qualifying_map(rng), MAP_TRIES,
                                      f"{self!r}: no map within {MAP_TRIES} draws")
        prompt = f"G{goal[0]}{goal[1]} {view(rows, start, self.neighbours)}"
        return Example(prompt=prompt, answer=f"{d + self.slack}|{'/'.join(rows)}",
                       target=shortest_moves(rows, start, goal))

    def score(self, completion: str, example: Example) -> float:
        """1 iff the move letters of `completion`, in order, reach the goal within the example's turn budget."""
        budget, rows, start, goal = parse_map(example.answer)
        return 1.0 if reached(rows, start, goal, completion, budget) else 0.0

    def expert_actions(self, example: Example) -> list[str]:
        """A shortest path with random detours (probability `detour` per move, only while the turn budget still
        reaches the goal afterwards); seeded by the example, so the same example always gets the same moves."""
        budget, rows, pos, goal = parse_map(example.answer)
        rng = random.Random(hashlib.sha256(example.answer.encode()).hexdigest())
        dist, moves = distances(rows, goal), []
        while pos != goal:
            left = budget - len(moves)
            options = [m for m in "UDLR" if moved(rows, pos, m) != pos]
            best = [m for m in options if dist.get(moved(rows, pos, m), -1) == dist[pos] - 1]
            detours = [m for m in options if m not in best and dist[moved(rows, pos, m)] <= left - 1]
            move = rng.choice(detours) if detours and rng.random() < self.detour else best[0]
            moves.append(move)
            pos = moved(rows, pos, move)
        return moves

    def make_env(self) -> "GridworldEnv":
        return GridworldEnv(self)

    def __repr__(self) -> str:
        return (f"GridworldTask(size={self.size}, walls={self.walls}, min_distance={self.min_distance}, "
                f"max_distance={self.max_distance}, slack={self.slack}, detour={self.detour}, "
                f"neighbours={self.neighbours})")


class GridworldEnv(Env):
    """One episode on an example's map; `max_turns` is the example's budget (shortest path + slack)."""

    stop = tuple(MOVES)

    def __init__(self, task: GridworldTask):
        self.task = task
        self.max_turns = task.size * task.size  # the rollout's cap; each example ends at its own budget
        self.rows, self.pos, self.goal, self.budget, self.moves = [], None, None, 0, 0

    def reset(self, example: Example, seed: int | None = None):
        self.budget, self.rows, self.pos, self.goal = parse_map(example.answer)
        self.moves = 0
        return [user(example.prompt)], {"state": self.pos}

    def actions(self) -> list[str]:
        """Every action this environment tells apart (random-policy rollouts draw from these)."""
        return list(MOVES)

    def step(self, action: str):
        if self.pos is None:
            raise RuntimeError("step before reset")
        self.moves += 1
        move = action[-1:] if action[-1:] in MOVES else None
        error = None if move else "no move letter (U/D/L/R)"
        if move:
            self.pos = moved(self.rows, self.pos, move)
        won = self.pos == self.goal
        done = won or self.moves >= self.budget
        observation = tool("\n" + view(self.rows, self.pos, self.task.neighbours))
        return [observation], float(won), done, {"state": self.pos, "tool_error": error}
