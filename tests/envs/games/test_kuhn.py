"""Kuhn poker solved exactly: the game value -1/18 along the whole equilibrium family, exploitability 0 there and
positive off it, best responses checked against hand computations and a brute-force oracle over pure strategies,
and illegal actions forfeiting the hand."""
import itertools
import random
from fractions import Fraction

import pytest

from workbench.envs.games import kuhn
from workbench.envs.games.kuhn import (GAME_VALUE, INFOSETS, best_response, best_response_value, expected_value,
                                       exploitability, nash_conv, nash_strategy, step, uniform_strategy)

ALPHAS = [Fraction(k, 12) for k in range(5)]  # 0, 1/12, ..., 1/3
ALWAYS_BET = {p: {name: 1 for name in INFOSETS[p]} for p in (0, 1)}
ALWAYS_PASS = {p: {name: 0 for name in INFOSETS[p]} for p in (0, 1)}


def pure_strategies(player):
    """All 2^6 pure strategies of `player`."""
    for bits in itertools.product((0, 1), repeat=len(INFOSETS[player])):
        yield dict(zip(INFOSETS[player], bits))


def oracle_best_response_value(strategy, player):
    """An independent best response: the best of all 64 pure strategies, each scored by `expected_value`."""
    sign = 1 if player == 0 else -1
    pair = (lambda s: (s, strategy)) if player == 0 else (lambda s: (strategy, s))
    return max(sign * expected_value(*pair(s)) for s in pure_strategies(player))


def random_strategy(player, rng, exact=True):
    if exact:
        return {name: Fraction(rng.randint(0, 12), 12) for name in INFOSETS[player]}
    return {name: rng.random() for name in INFOSETS[player]}


def test_infosets_are_named_by_card_and_history():
    assert INFOSETS[0] == ("J", "Q", "K", "Jpb", "Qpb", "Kpb")
    assert INFOSETS[1] == ("Jp", "Qp", "Kp", "Jb", "Qb", "Kb")
    assert len(kuhn.DEALS) == 6 and kuhn.infoset(1, "pb") == "Qpb" and kuhn.to_act("pb") == 0


def test_terminal_payoffs():
    assert [kuhn.payoff((2, 0), h) for h in kuhn.TERMINALS] == [1, 1, 2, -1, 2]
    assert [kuhn.payoff((0, 2), h) for h in kuhn.TERMINALS] == [-1, 1, -2, -1, -2]
    with pytest.raises(ValueError, match="terminal"):
        kuhn.payoff((0, 1), "pb")


@pytest.mark.parametrize("alpha", ALPHAS)
def test_the_game_value_is_minus_one_eighteenth_along_the_equilibrium_family(alpha):
    s0, s1 = nash_strategy(alpha)
    assert expected_value(s0, s1) == GAME_VALUE == Fraction(-1, 18)
    assert best_response_value(s1, 0) == Fraction(-1, 18)  # player 0 cannot gain against player 1's equilibrium
    assert best_response_value(s0, 1) == Fraction(1, 18)  # nor player 1 against any member of the family
    assert exploitability(s0, s1) == 0 and nash_conv(s0, s1) == 0


@pytest.mark.parametrize("alpha", [0.0, 0.1, 0.2, 1 / 3])
def test_float_strategies_give_floats_close_to_the_exact_values(alpha):
    s0, s1 = nash_strategy(alpha)
    assert expected_value(s0, s1) == pytest.approx(-1 / 18)
    assert exploitability(s0, s1) == pytest.approx(0, abs=1e-12)


def test_nash_strategy_refuses_alpha_outside_the_family():
    for alpha in (-0.01, Fraction(1, 3) + Fraction(1, 1000), 0.5):
        with pytest.raises(ValueError, match="alpha"):
            nash_strategy(alpha)


def test_uniform_random_strategies_by_hand():
    # By hand: BR_0 vs uniform = (K 3/2 + Q 1/2 + J -1/2) / 3 = 1/2; BR_1 vs uniform = (K 7/4 + Q 1/4 + J -3/4) / 3
    # = 5/12; NashConv = 11/12 (OpenSpiel's value for kuhn_poker's uniform policy), exploitability 11/24.
    u0, u1 = uniform_strategy(0), uniform_strategy(1)
    assert best_response_value(u1, 0) == Fraction(1, 2) == oracle_best_response_value(u1, 0)
    assert best_response_value(u0, 1) == Fraction(5, 12) == oracle_best_response_value(u0, 1)
    assert nash_conv(u0, u1) == Fraction(11, 12) and exploitability(u0, u1) == Fraction(11, 24)


def test_full_distributions_are_accepted():
    u0 = {name: {"p": Fraction(1, 2), "b": Fraction(1, 2)} for name in INFOSETS[0]}
    assert exploitability(u0, uniform_strategy(1)) == Fraction(11, 24)
    with pytest.raises(ValueError, match="sum to 1"):
        expected_value({**u0, "J": {"p": 0.3, "b": 0.3}}, uniform_strategy(1))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        expected_value({**u0, "J": 1.5}, uniform_strategy(1))
    with pytest.raises(KeyError, match="Jpb"):
        expected_value({k: v for k, v in u0.items() if k != "Jpb"}, uniform_strategy(1))


def test_best_responses_to_simple_strategies_by_hand():
    # Player 1 always bets and calls: K wins 2 either way (its bet is called, or it checks and calls the bet),
    # Q is indifferent too (0: a showdown for 2 against J or K), J checks and folds (-1): (2 + 0 - 1) / 3 = 1/3;
    # ties go to the passive action.
    assert best_response_value(ALWAYS_BET[1], 0) == Fraction(1, 3)
    br = best_response(ALWAYS_BET[1], 0)
    assert br == {"K": 0, "Kpb": 1, "Q": 0, "Qpb": 1, "J": 0, "Jpb": 0}
    assert expected_value(br, ALWAYS_BET[1]) == Fraction(1, 3)
    # Player 0 always bets: player 1 calls with K (+2) and Q (0), folds J (-1): 1/3.
    assert best_response_value(ALWAYS_BET[0], 1) == Fraction(1, 3)
    assert {k: v for k, v in best_response(ALWAYS_BET[0], 1).items() if k.endswith("b")} == {"Kb": 1, "Qb": 1, "Jb": 0}
    # Player 1 never bets and always folds: player 0 bets every card and wins the ante, +1.
    assert best_response_value(ALWAYS_PASS[1], 0) == 1
    # Player 0 always checks and folds: player 1 bets every card after the check, +1.
    assert best_response_value(ALWAYS_PASS[0], 1) == 1
    # Always-bet against always-bet: every hand is a showdown for 2, player 0 wins half of them: 0.
    assert expected_value(ALWAYS_BET[0], ALWAYS_BET[1]) == 0


def test_best_response_agrees_with_the_brute_force_oracle_exactly():
    rng = random.Random(0)
    for _ in range(15):
        s0, s1 = random_strategy(0, rng), random_strategy(1, rng)
        for player, fixed in ((0, s1), (1, s0)):
            value = best_response_value(fixed, player)
            assert value == oracle_best_response_value(fixed, player)
            pure = best_response(fixed, player)
            achieved = expected_value(pure, fixed) if player == 0 else -expected_value(fixed, pure)
            assert achieved == value  # the recorded pure strategy reaches the value


@pytest.mark.parametrize("exact", [True, False])
def test_exploitability_is_non_negative_for_200_random_strategy_pairs(exact):
    rng = random.Random(1)
    for _ in range(200):
        s0, s1 = random_strategy(0, rng, exact), random_strategy(1, rng, exact)
        value = expected_value(s0, s1)
        br0, br1 = best_response_value(s1, 0), best_response_value(s0, 1)
        assert br0 >= value - 1e-12 and br1 >= -value - 1e-12  # a best response is at least as good as staying
        assert br0 >= GAME_VALUE - 1e-12 and br1 >= -GAME_VALUE - 1e-12  # nobody holds the other below the value
        assert exploitability(s0, s1) >= -1e-12
        if exact:
            assert exploitability(s0, s1) > 0  # a grid of twelfths never hits the equilibrium (Q bets 0, J/Qb 1/3)


@pytest.mark.parametrize("alpha", [Fraction(0), Fraction(1, 6), Fraction(1, 3)])
def test_every_deviation_off_the_family_is_exploitable(alpha):
    s0, s1 = nash_strategy(alpha)
    eps = Fraction(1, 10)
    for name in INFOSETS[1]:  # player 1's equilibrium is unique: any change at any set is exploitable
        q = s1[name] + eps if s1[name] + eps <= 1 else s1[name] - eps
        assert exploitability(s0, {**s1, name: q}) > 0, name
    deviations = [("Q", eps), ("Jpb", eps), ("Qpb", s0["Qpb"] + eps if alpha < Fraction(1, 3) else s0["Qpb"] - eps)]
    if alpha < Fraction(1, 3):  # at alpha = 1/3 player 0 always bets K, so "Kpb" is never reached
        deviations.append(("Kpb", 1 - eps))
    else:
        assert exploitability({**s0, "Kpb": 1 - eps}, s1) == 0
    for name, q in deviations:
        assert exploitability({**s0, name: q}, s1) > 0, name
    j = alpha + eps if alpha + eps <= Fraction(1, 3) else alpha - eps  # J off its 1/3 ratio to K
    assert exploitability({**s0, "J": j}, s1) > 0


def test_step_plays_a_hand_and_forfeits_illegal_actions():
    cards = (1, 2)  # Q against K
    s = step(cards, "", "p")
    assert s == kuhn.Step("p", False, None, None)
    s = step(cards, s.history, "b")
    assert s == kuhn.Step("pb", False, None, None)
    assert step(cards, "pb", "b") == kuhn.Step("pbb", True, (-2, 2), None)
    assert step(cards, "pb", "p") == kuhn.Step("pbp", True, (-1, 1), None)
    assert step(cards, "b", "p") == kuhn.Step("bp", True, (1, -1), None)
    bad = step(cards, "", "raise")  # player 0 forfeits its ante
    assert bad.done and bad.rewards == (-1, 1) and bad.history == "" and "not an action" in bad.illegal
    bad = step(cards, "p", "")  # player 1 forfeits
    assert bad.done and bad.rewards == (1, -1) and "player 1" in bad.illegal
    over = step(cards, "pp", "b")
    assert over.done and over.rewards is None and over.illegal == "the hand is over"
    with pytest.raises(ValueError, match="distinct"):
        step((1, 1), "", "p")
