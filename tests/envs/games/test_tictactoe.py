"""Tic-tac-toe: the rules, the well-known counts (5,478 positions, 958 terminal, 255,168 games) checked by two
enumerations, the minimax solution (the empty board draws, immediate wins and blocks found, never losing to a
random player, always drawing against itself), and illegal moves forfeiting instead of raising."""
import functools
import itertools
import random
from collections import Counter

import pytest

from workbench.envs.games import tictactoe as ttt
from workbench.envs.games.tictactoe import (EMPTY, IllegalMove, Step, best_moves, legal_moves, minimax_player,
                                            minimax_value, outcome, play, random_player, rewards, step, to_move,
                                            winner)


def reachable():
    """Every position reachable from the empty board by legal play (the search stops at a finished game)."""
    seen, frontier = {EMPTY}, [EMPTY]
    while frontier:
        board = frontier.pop()
        for cell in legal_moves(board):
            child = play(board, cell)
            if child not in seen:
                seen.add(child)
                frontier.append(child)
    return seen


def lines_of(board, mark):
    return sum(all(board[i] == mark for i in line) for line in ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6),
                                                                 (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)))


def legal_by_counting(board):
    """A second, independent test of a position: mark counts and who can have a line (no search, own line list)."""
    x, o = board.count("X"), board.count("O")
    wx, wo = lines_of(board, "X"), lines_of(board, "O")
    if x - o not in (0, 1) or (wx and wo):
        return False
    return not (wx and x != o + 1) and not (wo and x != o)


def test_rules_winner_outcome_and_turns():
    assert to_move(EMPTY) == "X" and to_move("X........") == "O"
    assert winner("XXXOO....") == "X" and winner("XX.OOO.X.") == "O" and winner("X...X...X") == "X"
    assert outcome("XOXXOOOXX") == "draw" and outcome("XO.......") is None
    assert legal_moves("XO.......") == list(range(2, 9)) and legal_moves("XXXOO....") == []
    assert play(EMPTY, 4) == "....X...." and play("....X....", 0) == "O...X...."
    assert rewards("X") == {"X": 1, "O": -1} and rewards("draw") == {"X": 0, "O": 0}
    for bad in ("........", "XXXXXXXXX!", 123, "xo......."):
        with pytest.raises(ValueError, match="9-character"):
            outcome(bad)
    with pytest.raises(ValueError, match="no game reaches"):
        to_move("XX.......")


def test_the_well_known_position_counts_by_two_enumerations():
    positions = reachable()
    assert len(positions) == 5478  # the empty board included
    by_counting = {"".join(b) for b in itertools.product("XO.", repeat=9) if legal_by_counting("".join(b))}
    assert by_counting == positions
    terminal = Counter(outcome(b) for b in positions if outcome(b))
    assert sum(terminal.values()) == 958 and terminal == {"X": 626, "O": 316, "draw": 16}


def test_the_well_known_number_of_games():
    @functools.cache
    def games(board):  # (X wins, O wins, draws) over the games continuing from `board`, memoized per position
        result = outcome(board)
        if result:
            return tuple(int(result == r) for r in ("X", "O", "draw"))
        return tuple(map(sum, zip(*(games(play(board, cell)) for cell in legal_moves(board)))))

    x, o, draw = games(EMPTY)
    assert x + o + draw == 255168 and (x, o, draw) == (131184, 77904, 46080)


def test_the_empty_board_is_a_draw_and_every_opening_keeps_it():
    assert minimax_value(EMPTY) == 0 == minimax_value(EMPTY, "X")
    assert best_moves(EMPTY) == list(range(9))
    with pytest.raises(ValueError, match="X's turn"):
        minimax_value(EMPTY, "O")
    assert minimax_value("XXXOO....") == -1 and minimax_value("XOXXOOOXX") == 0  # terminal: the mover lost / draw


def test_immediate_wins_blocks_and_forks():
    assert best_moves("XX.OO....") == [2] and minimax_value("XX.OO....") == 1  # X wins now
    assert best_moves("XX..O....") == [2]  # O must block
    # after X corner, O edge (a losing reply), X wins by force; its best moves all keep the win
    assert minimax_value("XO.......") == 1 and minimax_value(play("XO.......", best_moves("XO.......")[0])) == -1
    assert best_moves("OO.OX.XX.") == [2, 8]  # two immediate wins (a diagonal and a row), both found
    # X to move against two open threats of O (cells 1 and 3) and no win of its own: lost, every move is as bad
    assert to_move("O.O..XOXX") == "X" and minimax_value("O.O..XOXX") == -1
    assert best_moves("O.O..XOXX") == legal_moves("O.O..XOXX") == [1, 3, 4]


def play_game(x_player, o_player, seed):
    rng, board = random.Random(seed), EMPTY
    while not outcome(board):
        board = play(board, (x_player if to_move(board) == "X" else o_player)(board, rng))
    return outcome(board)


def test_minimax_never_loses_to_a_random_player():
    as_x = Counter(play_game(minimax_player, random_player, seed) for seed in range(300))
    as_o = Counter(play_game(random_player, minimax_player, seed) for seed in range(300))
    assert as_x["O"] == 0 and as_o["X"] == 0
    assert as_x["X"] > 200 and as_o["O"] > 100  # and it usually wins (random play blunders)


def test_minimax_against_minimax_always_draws():
    assert {play_game(minimax_player, minimax_player, seed) for seed in range(100)} == {"draw"}
    # the choice among best moves is seeded: the same seed gives the same game, others differ
    assert len({minimax_player(EMPTY, random.Random(seed)) for seed in range(20)}) > 1
    assert minimax_player(EMPTY, random.Random(7)) == minimax_player(EMPTY, random.Random(7))


@pytest.mark.parametrize("cell, reason", [(4, "cell 4 is taken by X"), (9, "off the board"), (-1, "off the board"),
                                          ("4", "not a cell"), (4.0, "not a cell"), (True, "not a cell"),
                                          (None, "not a cell")])
def test_illegal_moves_forfeit_the_game_and_are_reported_not_raised(cell, reason):
    board = "....X...."  # O to move
    result = step(board, cell)
    assert result.board == board and result.outcome == "X"  # O forfeits: X wins
    assert reason in result.illegal and "O forfeits the game" in result.illegal
    assert rewards(result.outcome) == {"X": 1, "O": -1}
    with pytest.raises(IllegalMove, match=reason):
        play(board, cell)


def test_moves_after_the_game_is_over_change_nothing():
    for board, result in (("XXXOO....", "X"), ("XOXXOOOXX", "draw")):
        assert step(board, 8) == Step(board, result, ttt.illegal_reason(board, 8))
        assert "the game is over" in step(board, 8).illegal
        with pytest.raises(IllegalMove, match="over"):
            play(board, 8)
        with pytest.raises(ValueError, match="over"):
            minimax_player(board, random.Random(0))
        assert best_moves(board) == []


def test_legal_steps_play_the_move_and_report_the_outcome():
    assert step(EMPTY, 4) == Step("....X....", None, None)
    assert step("XX.OO....", 2) == Step("XXXOO....", "X", None)
    assert step("XOXXOO.XO", 6) == Step("XOXXOOXXO", "X", None)
    assert step("XOXXOOOX.", 8) == Step("XOXXOOOXX", "draw", None)
