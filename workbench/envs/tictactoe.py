"""Tic-tac-toe as a two-agent text game, evaluated against the exact minimax player.

The rules and the solution are `workbench.envs.games.tictactoe`'s (cells 0-8 row by row, X moves first). Agent 0
is X, agent 1 is O. A row starts from the empty board and sees the board after each of the other agent's moves:

    X   prompt "X.........:"                action "4"   observation "O...X....:"   action "8" ...
    O   prompt "O.........:....X....:"      action "0"   observation "O...X...X:"   ...

An action is one digit (every digit is a stop string). A move into a taken cell, off the board ("9"), anything before
the digit or no digit at all is illegal: the mover forfeits the game (reward -1, the other +1; `tictactoe.step`), pays `illegal_penalty`
more (default 1, so a forfeit is never as good as a lost game played out) and is told why in an observation. Rewards
come at the end, one per agent: +1 win, 0 draw, -1 loss (zero-sum, except for the penalty).

Evaluation plays `eval_games` games against each of two Python players, the policy taking X in half of them:
accuracy = the share not lost against the minimax player ("solver": perfect, never loses; a draw is the best
anyone gets), with the win, draw, loss and forfeit rates, and the win rate against the random player.

Python players: "random" (a uniformly random legal move), "solver" (`minimax_player`: a random one of the moves
keeping the minimax value), "scripted" (win now if it can, else block the other's line, else the centre, else a
random legal move: the classic rule player, beatable by forks).
"""
from __future__ import annotations

import random

from workbench import registry
from workbench.envs.base import check_knob_rules, tool, user
from workbench.envs.games import tictactoe as ttt
from workbench.envs.multiagent import GameTask, MultiAgentEnv
from workbench.tasks.base import Example


def board_view(board: str) -> str:
    return f"{board}:"


def cell_of(action: str):
    """The cell an action names: exactly one digit, as an int, else the action itself (illegal: `ttt.step` says
    why; a space before the digit too, as in Kuhn poker)."""
    return int(action) if len(action) == 1 and action.isdigit() else action


def completing(board: str, mark: str) -> list[int]:
    """Empty cells that complete a line of `mark`'s."""
    return [c for c in ttt.legal_moves(board) if ttt.winner(board[:c] + mark + board[c + 1:]) == mark]


def scripted_move(board: str, rng: random.Random) -> int:
    mark = ttt.to_move(board)
    for cells in (completing(board, mark), completing(board, ttt.other(mark))):
        if cells:
            return rng.choice(cells)
    return 4 if board[4] == "." else ttt.random_player(board, rng)


def board_player(move):
    return lambda env, rng: str(move(env.board, rng))


class TicTacToeEnv(MultiAgentEnv):
    agents = ttt.MARKS  # agent 0 plays X, agent 1 plays O
    stop = tuple("0123456789")
    max_turns = 5  # X moves at most five times
    players = {"random": board_player(ttt.random_player), "solver": board_player(ttt.minimax_player),
               "scripted": board_player(scripted_move)}

    def __init__(self, task=None):
        self.task, self.board, self.result = task, None, None
        self.penalty = task.illegal_penalty if task is not None else 1.0

    def reset(self, example: Example, seed: int | None = None):
        self.board, self.result = example.answer, None
        return [[user(mark + board_view(self.board))] for mark in ttt.MARKS], {"state": self.board}

    def to_move(self) -> int | None:
        return None if self.result else ttt.MARKS.index(ttt.to_move(self.board))

    def step(self, action: str):
        if self.board is None:
            raise RuntimeError("step before reset")
        mover = self.to_move()
        if mover is None:
            return [[], []], [0.0, 0.0], True, {"state": None, "tool_error": "the game is over"}
        result = ttt.step(self.board, cell_of(action))
        self.board, self.result = result.board, result.outcome
        observations = [[], []]
        if result.illegal:
            observations[mover] = [tool(f" illegal: {result.illegal}")]
        else:
            observations[1 - mover] = [tool(board_view(self.board))]
        points = ttt.rewards(self.result) if self.result else {mark: 0 for mark in ttt.MARKS}
        rewards = [float(points[mark]) for mark in ttt.MARKS]
        if result.illegal:
            rewards[mover] -= self.penalty
        return (observations, rewards, self.result is not None,
                {"state": self.board, "tool_error": result.illegal, "outcome": self.result})


TICTACTOE_LOGS = {
    "eval/win": ("Share of evaluation games won against the minimax player (seats alternating; only on evaluation "
                 "steps).", "0: perfect play never loses; above 0 means the evaluation is broken."),
    "eval/draw": ("Share of evaluation games drawn against the minimax player.",
                  "Rises towards 1 as the policy learns not to lose (eval/accuracy = win + draw)."),
    "eval/loss": ("Share of evaluation games lost against the minimax player, forfeits included.",
                  "Falls towards 0."),
    "eval/forfeit": ("Share of evaluation games against the minimax player the policy lost by an illegal move.",
                     "Near 0 after the warm start; rising: the format is breaking down."),
    "eval/win_vs_random": ("Share of evaluation games won against a uniformly random legal player.",
                           "Rises with play strength: a random player itself wins about 0.44 (58 % as X, 29 % as O)."),
}


@registry.env(
    "tictactoe", title="Tic-tac-toe, two agents, evaluated against the minimax player", family="multiagent",
    summary="X and O take turns naming a cell 0-8 after seeing the board; illegal moves forfeit. Evaluated by "
            "playing the exact minimax player (non-loss rate; perfect play draws) and a random player.",
    logs=TICTACTOE_LOGS)
class TicTacToeTask(GameTask):
    """Every example is the empty board (one prompt group per draw of the step).

    Knobs (`task_kw`): expert, the Python player whose games warm-start the policy ("random": legal moves only,
    "scripted", "solver"); eval_games, games against each evaluation opponent (half of them as X); illegal_penalty,
    what an illegal move costs beyond the forfeit (1)."""

    name = "tictactoe"
    accuracy_is = "share of games not lost against the minimax player"

    def __init__(self, *, expert: str = "random", eval_games: int = 64, illegal_penalty: float = 1.0):
        check_knob_rules("tictactoe", [
            (expert not in TicTacToeEnv.players, f"expert one of {sorted(TicTacToeEnv.players)}, got {expert!r}"),
            (eval_games < 2 or eval_games % 2, f"eval_games an even number >= 2 (half as X), got {eval_games}"),
            (illegal_penalty < 0, f"illegal_penalty >= 0, got {illegal_penalty}")])
        self.expert, self.eval_games, self.illegal_penalty = expert, eval_games, float(illegal_penalty)

    def make_example(self, rng: random.Random) -> Example:
        return Example(prompt="X" + board_view(ttt.EMPTY), answer=ttt.EMPTY, target="")

    def make_env(self) -> TicTacToeEnv:
        return TicTacToeEnv(self)

    def evaluate(self, policy) -> tuple[float, list[dict], dict]:
        example = self.make_example(random.Random(0))
        solver = policy.play(self, example, opponent="solver", games=self.eval_games)
        scored = [{"opponent": "solver", **game} for game in solver]
        rates = {f"{k}": sum(g["result"] == k for g in solver) / len(solver) for k in ("win", "draw", "loss")}
        rates["forfeit"] = sum(g["illegal"] for g in solver) / len(solver)
        against_random = policy.play(self, example, opponent="random", games=self.eval_games)
        rates["win_vs_random"] = sum(g["result"] == "win" for g in against_random) / len(against_random)
        return 1.0 - rates["loss"], scored + [{"opponent": "random", **g} for g in against_random], rates
