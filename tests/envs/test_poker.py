"""Kuhn poker as a text game: payoffs per agent, forfeits, Python players, and the exact evaluation (exploitability
of the strategy read off a policy, win probability against the scripted player)."""
import random
from fractions import Fraction

import pytest

from workbench.envs.games import kuhn
from workbench.envs.poker import KuhnEnv, KuhnTask, scripted_strategy
from workbench.tasks import Example, get_task

pytestmark = pytest.mark.covers("kuhn")


def play(cards: str, actions: str):
    env = KuhnEnv()
    env.reset(Example("", cards, ""))
    total, seen = [0.0, 0.0], [[], []]
    for action in actions:
        mover = env.to_move()
        observations, rewards, done, info = env.step(action)
        total = [t + r for t, r in zip(total, rewards)]
        for k in (0, 1):
            seen[k] += [m["content"] for m in observations[k]]
    return env, total, seen, done, info, mover


@pytest.mark.parametrize("cards", ["JQ", "JK", "QJ", "QK", "KJ", "KQ"])
@pytest.mark.parametrize("history", kuhn.TERMINALS)
def test_every_hand_pays_kuhns_payoff_zero_sum(cards, history):
    env, total, seen, done, _, _ = play(cards, history)
    u0 = kuhn.payoff((kuhn.CARDS.index(cards[0]), kuhn.CARDS.index(cards[1])), history)
    assert done and env.to_move() is None and total == [u0, -u0]
    assert "".join(seen[0]) == history[1::2] and "".join(seen[1]) == history[0::2]  # each sees the other's actions


def test_an_illegal_action_forfeits_the_hand_pays_a_penalty_and_the_mover_is_told():
    env, total, seen, done, info, mover = play("KJ", "pz")
    assert mover == 1 and done and total == [1.0, -2.0]  # the forfeit's -1 and the penalty's -1
    assert seen[1][-1].startswith(" illegal:") and "forfeits" in info["tool_error"]
    assert env.step("p")[2] is True  # a step after the end changes nothing


def test_python_players_play_their_strategies():
    env, rng = KuhnEnv(), random.Random(0)
    env.reset(Example("", "KJ", ""))
    assert env.play("scripted", rng) == "b"
    bets = sum(env.play("random", rng) == "b" for _ in range(2000))
    assert 900 < bets < 1100
    with pytest.raises(ValueError, match="no player 'minimax'"):
        env.play("minimax", rng)


class StrategyPolicy:
    """A policy whose action probabilities are a given strategy pair's, with `illegal` mass on other actions."""

    def __init__(self, s0, s1, illegal=0.0):
        self.bet = {**s0, **s1}
        self.illegal = illegal

    def action_probs(self, task, contexts, actions, agents=None):
        from workbench.envs.base import Message  # noqa: F401  (contexts are messages)
        out = []
        for messages, turns in contexts:
            text = "".join(m["content"] for m in messages) + "".join(a + "".join(m["content"] for m in o)
                                                                      for a, o in turns)
            name = text[3] + "".join(ch for ch in text[5:] if ch in "pb")
            q = float(self.bet[name]) * (1 - self.illegal)
            out.append([(1 - self.illegal) - q, q])
        return out


def test_exploitability_is_read_off_the_policy_exactly():
    task = KuhnTask()
    for alpha in (Fraction(0), Fraction(1, 6), Fraction(1, 3)):
        _, _, metrics = task.evaluate(StrategyPolicy(*kuhn.nash_strategy(alpha)))
        assert metrics["exploitability"] == pytest.approx(0.0, abs=1e-12) and metrics["illegal"] == 0.0
    uniform = [kuhn.uniform_strategy(0), kuhn.uniform_strategy(1)]
    accuracy, records, metrics = task.evaluate(StrategyPolicy(*uniform, illegal=0.25))  # renormalized over p, b
    assert metrics["exploitability"] == pytest.approx(float(kuhn.exploitability(*uniform)), abs=1e-12)
    assert metrics["illegal"] == pytest.approx(0.25) and len(records) == 12
    assert accuracy == pytest.approx(0.0, abs=1e-12)  # the share of the uniform strategy's exploitability removed
    scripted = [scripted_strategy(0), scripted_strategy(1)]
    payoff = float(kuhn.expected_value(uniform[0], scripted[1]) - kuhn.expected_value(scripted[0], uniform[1])) / 2
    assert metrics["payoff_vs_scripted"] == pytest.approx(payoff)


def test_the_task_draws_every_deal_and_holds_nothing_out():
    task = get_task("kuhn")
    drawn = {e.answer for e in task.sample(200, random.Random(0))}
    assert drawn == {kuhn.CARDS[a] + kuhn.CARDS[b] for a, b in kuhn.DEALS}
    with pytest.raises(ValueError, match=r"kuhn: need expert one of \['random', 'scripted', 'solver'\], got 'cfr'"):
        get_task("kuhn", expert="cfr")
    with pytest.raises(ValueError, match="illegal_penalty >= 0"):
        get_task("kuhn", illegal_penalty=-1.0)
    with pytest.raises(TypeError, match="is a game"):
        task.score("b", task.sample(1, random.Random(0))[0])


def test_an_action_is_exactly_its_letter():
    for action in (" b", "bb", "B", "\np"):
        _, total, _, done, info, _ = play("QK", [action])
        assert done and total == [-2.0, 1.0] and info["tool_error"], action
