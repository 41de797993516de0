"""Tic-tac-toe as a text game: boards seen after each move, outcomes per agent, forfeits, the Python players."""
import random

import pytest

from workbench.envs.games import tictactoe as ttt
from workbench.envs.tictactoe import TicTacToeEnv, scripted_move
from workbench.tasks import Example, get_task

pytestmark = pytest.mark.covers("tictactoe")


def game(moves):
    env = TicTacToeEnv()
    views, _ = env.reset(Example("", ttt.EMPTY, ""))
    total, seen = [0.0, 0.0], [[], []]
    for move in moves:
        observations, rewards, done, info = env.step(move)
        total = [t + r for t, r in zip(total, rewards)]
        for k in (0, 1):
            seen[k] += [m["content"] for m in observations[k]]
    return env, views, total, seen, done, info


def test_a_win_pays_plus_one_minus_one_and_each_agent_sees_the_board_after_the_others_move():
    env, views, total, seen, done, info = game("03142")  # X: 0 1 2, a row
    assert [v[0]["content"] for v in views] == ["X.........:", "O.........:"]
    assert done and info["outcome"] == "X" and total == [1.0, -1.0]
    assert seen[1] == ["X........:", "XX.O.....:", "XXXOO....:"] and seen[0] == ["X..O.....:", "XX.OO....:"]


def test_a_draw_pays_nothing():
    _, _, total, _, done, info = game("041263578")  # X0 O4 X1 O2 X6 O3 X5 O7 X8: a full board, no line
    assert done and info["outcome"] == "draw" and total == [0.0, 0.0]


@pytest.mark.parametrize("bad", ["4", "9", "a", "", " 5", "5 "])
def test_an_illegal_move_forfeits_and_is_explained(bad):
    env, _, total, seen, done, info = game(["4", bad])  # O moves into the taken centre, off the board, or no cell
    assert done and total == [1.0, -2.0] and seen[1][-1].startswith(" illegal:") and "forfeits" in info["tool_error"]


def test_scripted_player_wins_then_blocks_and_solver_never_loses():
    rng = random.Random(0)
    assert scripted_move("XX.OO....", rng) == 2  # X to move: completes its row
    assert scripted_move("XX..O....", rng) == 2  # O to move: blocks X's row
    env = TicTacToeEnv()
    for seed in range(30):
        env.reset(Example("", ttt.EMPTY, ""))
        rng, done = random.Random(seed), False
        while not done:
            player = "solver" if env.to_move() == seed % 2 else "random"
            _, rewards, done, _ = env.step(env.play(player, rng))
        assert rewards[seed % 2] >= 0  # perfect play never loses


def test_task_knobs_are_checked():
    with pytest.raises(ValueError, match="eval_games an even number >= 2"):
        get_task("tictactoe", eval_games=3)
    with pytest.raises(ValueError, match="expert one of"):
        get_task("tictactoe", expert="alphazero")
    assert get_task("tictactoe", illegal_penalty=0.0).make_env().penalty == 0.0
