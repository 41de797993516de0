"""Kuhn poker (Kuhn 1950), solved exactly: expected values, best responses, exploitability, the Nash equilibria.

Rules. A deck of three cards J < Q < K (numbered 0, 1, 2); each player antes 1 chip and is dealt one card, the
third stays hidden. Player 0 acts first. A player either passes ("p": check, or fold when facing a bet) or bets
("b": bet 1 chip, or call a bet). Histories are strings over {p, b}; the five terminal histories and player 0's
payoff u_0 (player 1 gets -u_0: the game is zero-sum), with s = +1 if player 0 holds the higher card, else -1:

    pp    both check          showdown   u_0 = s        (pot 2)
    bp    bet, fold           player 0   u_0 = +1
    bb    bet, call           showdown   u_0 = 2 s      (pot 4)
    pbp   check, bet, fold    player 1   u_0 = -1
    pbb   check, bet, call    showdown   u_0 = 2 s

Information sets are named by the acting player's card and the history so far (the notation of Neller & Lanctot,
"An Introduction to Counterfactual Regret Minimization", 2013): player 0 acts at "J", "Q", "K" (opening) and
"Jpb", "Qpb", "Kpb" (after check-bet); player 1 at "Jp", "Qp", "Kp" (after a check) and "Jb", "Qb", "Kb" (facing
a bet). A strategy for player i is a dict over its six information sets; each value is either the probability of
the aggressive action "b" (bet or call) or the full distribution {"p": 1 - q, "b": q}. Values may be floats or
`fractions.Fraction`s: with Fractions (and ints) every function here computes exactly, in rational arithmetic.

Equations. With the 6 deals (c_0, c_1) equally likely and pi^sigma(z) the probability of terminal history z
under the players' strategies,

    u_0(sigma_0, sigma_1) = sum_{(c_0, c_1)} 1/6 sum_z pi^sigma(z | c_0, c_1) u_0(z; c_0, c_1)      `expected_value`
    BR_i(sigma_{-i})      = max_{sigma_i} u_i(sigma_i, sigma_{-i})                               `best_response_value`

The best response is computed per information set, bottom-up: at player i's set I, with the opponent's cards
weighted by chance and by the opponent's probability of reaching each history in I, v(I) = max_a sum_{h in I}
pi_{-i}(h) v(h a) (Kuhn poker has perfect recall, so this maximum over sets is the maximum over strategies).

    NashConv(sigma)       = sum_i [BR_i(sigma_{-i}) - u_i(sigma)] = BR_0(sigma_1) + BR_1(sigma_0)  (u_0 + u_1 = 0)
    exploitability(sigma) = NashConv(sigma) / 2                                                  `exploitability`

the mean gain of a best responder over the two seats: >= 0, and 0 exactly at a Nash equilibrium. (OpenSpiel's
`exploitability` is the same NashConv / 2.)

Closed-form equilibria (Kuhn 1950; the standard parameterization, e.g. Hoehn et al. 2005, "Effective short-term
opponent exploitation in simplified poker"). For any alpha in [0, 1/3], player 0: bet J with alpha, never bet Q,
bet K with 3 alpha; after check-bet fold J, call Q with alpha + 1/3, call K. Player 1's equilibrium strategy is
unique: facing a bet fold J, call Q with 1/3, call K; after a check bet J with 1/3, check Q, bet K. Every such
pair is an equilibrium and these are all of them (up to player 0's choice at "Kpb" when alpha = 1/3: it always
bets K then, so "Kpb" is never reached); the game's value is -1/18 for player 0 (`GAME_VALUE`).

Illegal actions (for the text environments built on `step`): an action other than "p" or "b" forfeits the hand:
it ends, the mover loses its ante (-1, as if it folded) and the other player wins it (+1).
"""
from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import NamedTuple

CARDS = "JQK"  # card i is CARDS[i]; a higher index wins the showdown
ACTIONS = ("p", "b")  # pass (check / fold), bet (bet / call)
DEALS = tuple((c0, c1) for c0 in range(3) for c1 in range(3) if c0 != c1)  # (player 0's card, player 1's)
CHANCE = Fraction(1, 6)  # probability of each deal
DECISIONS = ("", "p", "b", "pb")  # histories where a player acts: len(history) % 2 acts
TERMINALS = ("pp", "bp", "bb", "pbp", "pbb")
INFOSETS = {0: tuple(c + h for h in ("", "pb") for c in CARDS), 1: tuple(c + h for h in ("p", "b") for c in CARDS)}
GAME_VALUE = Fraction(-1, 18)  # player 0's value of the game


def to_act(history: str) -> int:
    """The player who acts after `history` (a non-terminal history)."""
    return len(history) % 2


def infoset(card: int, history: str) -> str:
    """The information set's name: the acting player's card letter, then the history (e.g. "Qpb")."""
    return CARDS[card] + history


def is_terminal(history: str) -> bool:
    return history in TERMINALS


def payoff(cards: tuple[int, int], history: str) -> int:
    """Player 0's payoff at a terminal history with cards (player 0's, player 1's); player 1 gets the negation."""
    if history not in TERMINALS:
        raise ValueError(f"{history!r} is not a terminal history of Kuhn poker (terminal: {', '.join(TERMINALS)})")
    if history == "bp":
        return 1
    if history == "pbp":
        return -1
    showdown = 1 if cards[0] > cards[1] else -1
    return 2 * showdown if history.endswith("bb") else showdown


def bet_probability(strategy: Mapping, name: str):
    """The probability `strategy` puts on "b" at information set `name` (a number or a {"p", "b"} distribution)."""
    try:
        value = strategy[name]
    except KeyError:
        player = 0 if name in INFOSETS[0] else 1
        raise KeyError(f"the strategy has no information set {name!r}; player {player}'s sets are "
                       f"{', '.join(INFOSETS[player])}") from None
    if isinstance(value, Mapping):
        if set(value) - set(ACTIONS) or abs(sum(value.values()) - 1) > 1e-9:
            raise ValueError(f"{name}: a distribution must be over {ACTIONS} and sum to 1, got {dict(value)}")
        value = value.get("b", 0)
    if not 0 <= value <= 1:
        raise ValueError(f"{name}: the probability of 'b' must be in [0, 1], got {value}")
    return value


def _ev(cards, history, strategies):
    if history in TERMINALS:
        return payoff(cards, history)
    player = to_act(history)
    q = bet_probability(strategies[player], infoset(cards[player], history))
    return q * _ev(cards, history + "b", strategies) + (1 - q) * _ev(cards, history + "p", strategies)


def expected_value(strategy0: Mapping, strategy1: Mapping):
    """Player 0's exact expected payoff u_0(strategy0, strategy1), over the 6 deals and the whole tree."""
    return sum(CHANCE * _ev(cards, "", (strategy0, strategy1)) for cards in DEALS)


def _br(player, card, history, weights, opponent, choices):
    """The best responder's value at (its card, history), summed over the opponent's cards, each weighted by
    chance and the opponent's reach (`weights`: opponent card -> weight); records its choices."""
    if history in TERMINALS:
        sign = 1 if player == 0 else -1
        return sum(w * sign * payoff((card, o) if player == 0 else (o, card), history) for o, w in weights.items())
    if to_act(history) == player:
        bet = _br(player, card, history + "b", weights, opponent, choices)
        check = _br(player, card, history + "p", weights, opponent, choices)
        choices[infoset(card, history)] = 1 if bet > check else 0
        return max(bet, check)
    q = {o: bet_probability(opponent, infoset(o, history)) for o in weights}
    return (_br(player, card, history + "b", {o: w * q[o] for o, w in weights.items()}, opponent, choices)
            + _br(player, card, history + "p", {o: w * (1 - q[o]) for o, w in weights.items()}, opponent, choices))


def _best_response(strategy, player):
    if player not in (0, 1):
        raise ValueError(f"player must be 0 or 1, got {player!r}")
    choices = {}
    value = sum(_br(player, c, "", {o: CHANCE for o in range(3) if o != c}, strategy, choices) for c in range(3))
    return value, choices


def best_response_value(strategy: Mapping, player: int):
    """The exact value, for `player`, of its best response to the other player's fixed `strategy`."""
    return _best_response(strategy, player)[0]


def best_response(strategy: Mapping, player: int) -> dict:
    """A pure best response of `player` to the other player's `strategy`: information set -> 1 (bet/call) or
    0 (check/fold); a tie goes to the passive action."""
    return _best_response(strategy, player)[1]


def nash_conv(strategy0: Mapping, strategy1: Mapping):
    """BR_0(strategy1) + BR_1(strategy0): the players' summed gains from deviating to a best response."""
    return best_response_value(strategy1, 0) + best_response_value(strategy0, 1)


def exploitability(strategy0: Mapping, strategy1: Mapping):
    """NashConv / 2 = (BR_0(strategy1) + BR_1(strategy0)) / 2: >= 0, and 0 exactly at a Nash equilibrium."""
    return nash_conv(strategy0, strategy1) / 2


def nash_strategy(alpha=Fraction(0)) -> tuple[dict, dict]:
    """The equilibrium (player 0's strategy with parameter alpha in [0, 1/3], player 1's unique strategy), as
    probabilities of "b". A Fraction alpha gives exact Fractions."""
    if not 0 <= alpha <= Fraction(1, 3):
        raise ValueError(f"alpha must be in [0, 1/3] (Kuhn's equilibrium family), got {alpha}")
    third = Fraction(1, 3)
    strategy0 = {"J": alpha, "Q": 0, "K": 3 * alpha, "Jpb": 0, "Qpb": alpha + third, "Kpb": 1}
    strategy1 = {"Jp": third, "Qp": 0, "Kp": 1, "Jb": 0, "Qb": third, "Kb": 1}
    return strategy0, strategy1


def uniform_strategy(player: int) -> dict:
    """Each action with probability 1/2 at every information set of `player`."""
    return {name: Fraction(1, 2) for name in INFOSETS[player]}


class Step(NamedTuple):
    history: str  # the history after the action (unchanged when the action was illegal)
    done: bool  # the hand is over
    rewards: tuple[int, int] | None  # (player 0's, player 1's) payoffs when the hand ends, else None
    illegal: str | None  # why the action was illegal, None when it was legal


def step(cards: tuple[int, int], history: str, action: str) -> Step:
    """Play `action` at `history`. Never raises on a bad action: an action other than "p"/"b" forfeits the hand
    (the mover gets -1, the other +1); an action after the hand is over changes nothing and says so."""
    if len(cards) != 2 or set(cards) - {0, 1, 2} or cards[0] == cards[1]:
        raise ValueError(f"cards must be two distinct cards of 0, 1, 2 (J, Q, K), got {cards!r}")
    if history in TERMINALS:
        return Step(history, True, None, "the hand is over")
    if history not in DECISIONS:
        raise ValueError(f"{history!r} is not a history of Kuhn poker")
    if action not in ACTIONS:
        mover = to_act(history)
        rewards = (-1, 1) if mover == 0 else (1, -1)
        return Step(history, True, rewards, f"{action!r} is not an action: pass 'p' or bet 'b'; player {mover} "
                                            "forfeits the hand and its ante")
    history += action
    if history in TERMINALS:
        u0 = payoff(cards, history)
        return Step(history, True, (u0, -u0), None)
    return Step(history, False, None, None)
