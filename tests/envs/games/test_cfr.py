"""CFR on a game tree: the tree, values, best responses and NashConv agree with Kuhn poker's exact solution; CFR and
CFR+ reach Kuhn's equilibrium family and the unique equilibrium of Myerson's card game (a signalling game)."""
import itertools
from fractions import Fraction

import numpy as np
import pytest

from workbench.envs.games import cfr, kuhn

KUHN = cfr.kuhn_tree()
CARD = cfr.card_game_tree()


def kuhn_dicts(sigma):
    """Our [I, A] strategy as kuhn.py's two strategies (probability of "b" per information set)."""
    d = cfr.as_dict(KUHN, sigma)
    return [{name: d[name]["b"] for name in kuhn.INFOSETS[p]} for p in (0, 1)]


def to_sigma(strategy0, strategy1):
    return cfr.from_dict(KUHN, {name: {"p": 1 - float(q), "b": float(q)}
                                for s in (strategy0, strategy1) for name, q in s.items()})


def random_sigma(tree, seed):
    rng = np.random.default_rng(seed)
    raw = np.where(tree.legal, rng.random(tree.legal.shape), 0.0)
    return raw / raw.sum(1, keepdims=True)


def test_the_kuhn_tree_has_kuhns_histories_and_information_sets():
    assert (len(KUHN.actor), len(KUHN.names), int((KUHN.actor == cfr.TERMINAL).sum())) == (55, 12, 30)
    assert set(KUHN.names) == set(kuhn.INFOSETS[0]) | set(kuhn.INFOSETS[1])
    assert all(KUHN.owner[KUHN.index[name]] == p for p in (0, 1) for name in kuhn.INFOSETS[p])
    assert KUHN.actions[KUHN.index["Qpb"]] == ("p", "b") and KUHN.depth[KUHN.index["Qpb"]] == 3
    assert repr(KUHN) == "Tree(players=2, nodes=55, infosets=12, terminals=30)"


@pytest.mark.parametrize("seed", range(5))
def test_values_best_responses_and_nash_conv_agree_with_kuhns_exact_ones(seed):
    sigma = random_sigma(KUHN, seed)
    s0, s1 = kuhn_dicts(sigma)
    u = cfr.expected_values(KUHN, sigma)
    assert u[0] == pytest.approx(float(kuhn.expected_value(s0, s1)), abs=1e-12) and u[1] == pytest.approx(-u[0])
    assert cfr.best_response_value(KUHN, sigma, 0) == pytest.approx(float(kuhn.best_response_value(s1, 0)), abs=1e-12)
    assert cfr.best_response_value(KUHN, sigma, 1) == pytest.approx(float(kuhn.best_response_value(s0, 1)), abs=1e-12)
    assert cfr.nash_conv(KUHN, sigma) == pytest.approx(float(kuhn.nash_conv(s0, s1)), abs=1e-12)


def test_kuhns_equilibria_have_zero_nash_conv_and_the_game_value():
    for alpha in (Fraction(0), Fraction(1, 6), Fraction(1, 3)):
        sigma = to_sigma(*kuhn.nash_strategy(alpha))
        assert cfr.nash_conv(KUHN, sigma) == pytest.approx(0.0, abs=1e-12)
        assert cfr.expected_values(KUHN, sigma)[0] == pytest.approx(float(kuhn.GAME_VALUE), abs=1e-12)
    uniform = cfr.uniform(KUHN)
    assert cfr.nash_conv(KUHN, uniform) == pytest.approx(float(kuhn.nash_conv(kuhn.uniform_strategy(0),
                                                                               kuhn.uniform_strategy(1))))


def test_regret_matching_is_the_positive_part_normalized_and_uniform_without_positive_regret():
    legal = np.array([[True, True, True], [True, True, False], [True, True, False]])
    regrets = np.array([[1.0, 3.0, -2.0], [-1.0, -5.0, 9.0], [0.0, 0.0, 0.0]])
    np.testing.assert_allclose(cfr.regret_matching(regrets, legal),
                               [[0.25, 0.75, 0.0], [0.5, 0.5, 0.0], [0.5, 0.5, 0.0]])  # illegal slot 2 never played


@pytest.mark.covers("lspo")
def test_cfr_on_kuhn_poker_reaches_the_equilibrium_family():
    vanilla = cfr.cfr(KUHN, 1000, track=250)
    s0, s1 = kuhn_dicts(vanilla.average)
    assert float(kuhn.exploitability(s0, s1)) < 1e-2
    assert vanilla.trace[-1][1] == pytest.approx(2 * float(kuhn.exploitability(s0, s1)))  # NashConv = 2 x expl.
    assert vanilla.trace[-1][1] < vanilla.trace[0][1]
    plus = cfr.cfr(KUHN, 500, plus=True)
    s0, s1 = kuhn_dicts(plus.average)
    assert float(kuhn.exploitability(s0, s1)) < 1e-3
    nash1 = kuhn.nash_strategy()[1]  # player 1's equilibrium strategy is unique
    assert all(s1[name] == pytest.approx(float(q), abs=0.02) for name, q in nash1.items())
    alpha = s0["J"]  # player 0's: a member of Kuhn's one-parameter family
    assert 0 <= alpha <= 1 / 3 + 0.02
    expected0 = {"J": alpha, "Q": 0, "K": 3 * alpha, "Jpb": 0, "Qpb": alpha + 1 / 3, "Kpb": 1}
    assert all(s0[name] == pytest.approx(q, abs=0.03) for name, q in expected0.items())


def card_sigma(black_raise, meet):
    return cfr.from_dict(CARD, {"red": {"raise": 1.0, "fold": 0.0},
                                "black": {"raise": black_raise, "fold": 1 - black_raise},
                                "raised": {"meet": meet, "pass": 1 - meet}})


def test_myersons_card_game_has_its_known_unique_equilibrium():
    sigma = cfr.from_dict(CARD, cfr.CARD_GAME_EQUILIBRIUM)
    assert cfr.nash_conv(CARD, sigma) == pytest.approx(0.0, abs=1e-12)
    assert cfr.expected_values(CARD, sigma) == pytest.approx([cfr.CARD_GAME_VALUE, -cfr.CARD_GAME_VALUE])
    grid = [i / 12 for i in range(13)]  # an independent check of uniqueness: NashConv > 0 off (1/3, 2/3)
    gaps = {(q, m): cfr.nash_conv(CARD, card_sigma(q, m)) for q, m in itertools.product(grid, grid)}
    assert min(gaps, key=gaps.get) == (4 / 12, 8 / 12)
    assert all(gap > 1e-3 for point, gap in gaps.items() if point != (4 / 12, 8 / 12))
    assert cfr.nash_conv(CARD, cfr.from_dict(CARD, {"red": {"raise": 0.5, "fold": 0.5}})) > 0.1


@pytest.mark.covers("lspo")
@pytest.mark.parametrize("plus, iterations, tol", [(False, 2000, 0.03), (True, 1000, 0.005)])
def test_regret_matching_converges_to_the_signalling_games_equilibrium(plus, iterations, tol):
    """Card test (3): the average strategy of CFR (regret matching at every set) lands on Myerson's equilibrium:
    raise red, bluff black with 1/3, meet with 2/3."""
    solution = cfr.cfr(CARD, iterations, plus=plus)
    got = cfr.as_dict(CARD, solution.average)
    for name, dist in cfr.CARD_GAME_EQUILIBRIUM.items():
        assert all(got[name][a] == pytest.approx(p, abs=tol) for a, p in dist.items()), (name, got[name])
    assert cfr.expected_values(CARD, solution.average)[0] == pytest.approx(cfr.CARD_GAME_VALUE, abs=tol)


def test_a_one_player_problem_converges_to_its_best_action_and_nash_conv_is_the_regret():
    def node(history):
        if not history:
            return cfr.Decision(0, "choose", ("a", "b", "c"))
        return cfr.Terminal(({"a": 1.0, "b": 3.0, "c": 2.0}[history[0]],))

    tree = cfr.build(node, 1)
    assert cfr.nash_conv(tree, cfr.uniform(tree)) == pytest.approx(3.0 - 2.0)
    assert cfr.cfr(tree, 50).average[0] == pytest.approx([0, 1, 0], abs=0.05)


def test_a_warm_start_is_the_first_iterate_and_is_checked():
    start = card_sigma(0.9, 0.1)
    for plus in (False, True):  # CFR+: each player's first turn still plays the start (alternating updates)
        assert np.allclose(cfr.cfr(CARD, 1, init=start, plus=plus).average, start)
    with pytest.raises(ValueError, match="distribution"):
        cfr.cfr(CARD, 1, init=start * 2)
    with pytest.raises(ValueError, match="iterations"):
        cfr.cfr(CARD, 0)


def test_the_behaviour_policy_counts_moves_with_smoothing():
    moves = [("black", "raise")] * 3 + [("black", "fold")] + [("raised", "meet")]
    sigma = cfr.as_dict(CARD, cfr.empirical(CARD, moves, prior=1.0))
    assert sigma["black"] == pytest.approx({"raise": 4 / 6, "fold": 2 / 6})
    assert sigma["raised"] == pytest.approx({"meet": 2 / 3, "pass": 1 / 3})
    assert sigma["red"] == pytest.approx({"raise": 0.5, "fold": 0.5})  # never visited: uniform
    assert cfr.as_dict(CARD, cfr.empirical(CARD, moves, prior=0.0))["black"]["raise"] == pytest.approx(0.75)
    with pytest.raises(ValueError, match="not an information set"):
        cfr.empirical(CARD, [("blue", "raise")])
    with pytest.raises(ValueError, match="not an action"):
        cfr.empirical(CARD, [("black", "meet")])


@pytest.mark.parametrize("node, match", [
    (lambda h: cfr.Chance((("x", 0.5), ("y", 0.4))) if not h else cfr.Terminal((0.0,)), "do not sum to 1"),
    (lambda h: cfr.Terminal((1.0, 2.0)), "2 payoffs for 1 players"),
    (lambda h: cfr.Chance((("x", 0.5), ("y", 0.5))) if not h else
     cfr.Decision(0, "I", ("a",) if h == ("x",) else ("a", "b")) if len(h) == 1 else cfr.Terminal((0.0,)),
     "every history of a set needs the same"),
    (lambda h: cfr.Decision(0, "I", ("a", "b")) if len(h) < 2 and h != ("b",) else cfr.Terminal((0.0,)),
     "every history of a set needs the same"),  # "I" at depths 0 and 1
    (lambda h: "nonsense", "expected Terminal, Chance or Decision"),
])
def test_inconsistent_games_are_refused(node, match):
    with pytest.raises((ValueError, TypeError), match=match):
        cfr.build(node, 1)


def test_from_dict_checks_names_and_distributions():
    with pytest.raises(ValueError, match="not in the game"):
        cfr.from_dict(CARD, {"green": {"raise": 1.0}})
    with pytest.raises(ValueError, match="summing to 1"):
        cfr.from_dict(CARD, {"red": {"raise": 0.7}})
