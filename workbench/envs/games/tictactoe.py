"""Tic-tac-toe, solved exactly by minimax with memoization.

Board: a 9-character string over {"X", "O", "."}, cells numbered 0-8 row by row ("." empty):

    0 1 2
    3 4 5
    6 7 8

X moves first, so whose turn it is follows from the board (X when both have as many marks, else O). A game ends
when a player has three in a row (a row, a column or a diagonal: `LINES`) or the board is full (a draw).

Solution. The minimax value of a position from the view of the player to move,

    V(b) = -1                          if the previous mover has three in a row (the mover has lost)
    V(b) =  0                          if the board is full without a line (a draw)
    V(b) = max_{c empty} -V(b + c)     otherwise (negamax; each of the 5,478 positions is solved once, memoized)

V(empty board) = 0: perfect play draws. `best_moves` are the moves reaching the maximum; `minimax_player` picks
one of them uniformly with a seeded `random.Random`, so it never loses, and two of them always draw. Well-known
counts, checked in the tests: 5,478 positions reachable from the empty board (itself included), 958 of them
terminal, and 255,168 distinct games.

Illegal moves (for the text environments built on `step`): a move into an occupied cell, outside 0-8, or that
is not a cell number forfeits the game: the board is unchanged, the mover loses (reward -1, the opponent +1, as
any loss) and the step says why. A move after the game is over changes nothing and says so. `step` never raises
on a bad move; `play` raises `IllegalMove` for callers that want an exception. A malformed board (not 9 of
"X", "O", ".", or mark counts no game reaches) is a programming error and raises ValueError.
"""
from __future__ import annotations

import functools
import random
from typing import NamedTuple

EMPTY = "." * 9
MARKS = ("X", "O")
LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
REWARDS = {"win": 1, "draw": 0, "loss": -1}  # a forfeit (illegal move) is a loss


class IllegalMove(ValueError):
    """A move `play` refuses: the message says why."""


def _check(board: str) -> str:
    if not isinstance(board, str) or len(board) != 9 or set(board) - {"X", "O", "."}:
        raise ValueError(f"a board is a 9-character string over 'X', 'O', '.', got {board!r}")
    return board


def to_move(board: str) -> str:
    """"X" or "O": the player whose turn it is (X moves first)."""
    x, o = _check(board).count("X"), board.count("O")
    if x == o:
        return "X"
    if x == o + 1:
        return "O"
    raise ValueError(f"no game reaches {board!r}: X has {x} marks and O {o} (X moves first, then they alternate)")


def other(mark: str) -> str:
    return "O" if mark == "X" else "X"


def winner(board: str) -> str | None:
    """The player with three in a row, or None."""
    _check(board)
    for a, b, c in LINES:
        if board[a] != "." and board[a] == board[b] == board[c]:
            return board[a]
    return None


def outcome(board: str) -> str | None:
    """"X" or "O" (that player won), "draw" (full board, no line) or None (the game goes on)."""
    won = winner(board)
    if won:
        return won
    return "draw" if "." not in board else None


def legal_moves(board: str) -> list[int]:
    """The empty cells, in order; none once the game is over."""
    return [] if outcome(board) else [i for i, ch in enumerate(board) if ch == "."]


def illegal_reason(board: str, cell) -> str | None:
    """Why `cell` is not a legal move on `board`, or None when it is."""
    result = outcome(board)
    if result:
        return f"the game is over ({'a draw' if result == 'draw' else result + ' won'})"
    if isinstance(cell, bool) or not isinstance(cell, int):
        return f"{cell!r} is not a cell: moves are the numbers 0-8"
    if not 0 <= cell <= 8:
        return f"cell {cell} is off the board: cells are 0-8"
    if board[cell] != ".":
        return f"cell {cell} is taken by {board[cell]}"
    return None


def play(board: str, cell: int) -> str:
    """The board after the player to move marks `cell`; raises `IllegalMove` (a ValueError) when it is illegal."""
    reason = illegal_reason(board, cell)
    if reason:
        raise IllegalMove(reason)
    return board[:cell] + to_move(board) + board[cell + 1:]


class Step(NamedTuple):
    board: str  # the board after the move (unchanged when it was illegal)
    outcome: str | None  # "X", "O", "draw", or None while the game goes on
    illegal: str | None  # why the move was illegal (the mover forfeited), None when it was legal


def step(board: str, cell) -> Step:
    """Play `cell` for the player to move. Never raises on a bad move: an illegal one forfeits the game (board
    unchanged, the opponent wins); a move after the game is over changes nothing and says so."""
    result = outcome(board)
    mover = to_move(board)
    reason = illegal_reason(board, cell)
    if result:
        return Step(board, result, reason)
    if reason:
        return Step(board, other(mover), f"{reason}; {mover} forfeits the game")
    board = play(board, cell)
    return Step(board, outcome(board), None)


def rewards(result: str | None) -> dict[str, int]:
    """Each player's reward for an outcome: +1 win, 0 draw, -1 loss (a forfeit included); 0 while unfinished."""
    if result in MARKS:
        return {result: REWARDS["win"], other(result): REWARDS["loss"]}
    return {"X": REWARDS["draw"], "O": REWARDS["draw"]}


@functools.cache
def _value(board: str) -> int:
    result = outcome(board)
    if result:
        return 0 if result == "draw" else -1  # a line on the board is the previous mover's: the mover has lost
    mark = to_move(board)
    return max(-_value(board[:c] + mark + board[c + 1:]) for c in legal_moves(board))


def minimax_value(board: str, player: str | None = None) -> int:
    """+1 (win), 0 (draw) or -1 (loss) under perfect play, from the view of the player to move; `player`, when
    given, must be that player (the board fixes whose turn it is)."""
    mover = to_move(board)
    if player is not None and player != mover:
        raise ValueError(f"it is {mover}'s turn on {board!r}, not {player!r}")
    return _value(board)


def best_moves(board: str) -> list[int]:
    """The moves that keep the minimax value for the player to move (empty once the game is over)."""
    moves = legal_moves(board)
    if not moves:
        return []
    scores = {c: -_value(play(board, c)) for c in moves}
    best = max(scores.values())
    return [c for c in moves if scores[c] == best]


def minimax_player(board: str, rng: random.Random) -> int:
    """A perfect player: one of `best_moves`, uniformly at random with `rng` (seeded by the caller)."""
    moves = best_moves(board)
    if not moves:
        raise ValueError(f"the game is over on {board!r}: there is no move to choose")
    return rng.choice(moves)


def random_player(board: str, rng: random.Random) -> int:
    """A uniformly random legal move."""
    moves = legal_moves(board)
    if not moves:
        raise ValueError(f"the game is over on {board!r}: there is no move to choose")
    return rng.choice(moves)
