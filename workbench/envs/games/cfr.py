"""Counterfactual regret minimization (CFR, Zinkevich et al. 2007; CFR+, Tammelin 2014) on a small extensive-form
game given as a tree, vectorized over the tree's levels with numpy; best responses and NashConv on the same tree.

Game. Histories h: chance nodes (outcome probabilities), decision nodes (the acting player i = P(h), its
information set I(h), the same legal actions A(I) at every h in I), terminals z with payoffs u_j(z) for every
player j. `build(node, players)` enumerates the tree from a function node(history) -> `Terminal` | `Chance` |
`Decision` (history: the tuple of move labels so far). Assumed: perfect recall (a player's own moves and sets on
the way to any h in I are the same, so its own reach pi_i(h) is one number pi_i(I)); checked: every information
set's histories lie at one depth (the number of moves before a decision is common knowledge: true of Kuhn poker,
the card game below and the werewolf latent game), which lets the best response work level by level.

Reach and values under a behaviour profile sigma:

    pi(h) = prod of the probabilities of the moves on the path to h;   pi_i(h): player i's own moves only;
    pi_{-i}(h) = pi(h) / pi_i(h): everyone else's and chance's                                   `reach`
    v_j(z) = u_j(z),   v_j(h) = sum_a sigma(h, a) v_j(ha)   (chance: its probabilities)           `values`

Counterfactual regret of player i at I for action a, iteration t, and regret matching:

    r^t(I, a) = sum_{h in I} pi_{-i}^{sigma^t}(h) [v_i^{sigma^t}(ha) - v_i^{sigma^t}(h)]            `regrets`
    sigma^{t+1}(I, a) = R_+(I, a) / sum_b R_+(I, b)   (uniform over A(I) when no regret is positive)
    CFR:   R^t = sum_{s <= t} r^s,  simultaneous updates,  average  s(I, a) ∝ sum_t pi_i^{sigma^t}(I) sigma^t(I, a)
    CFR+:  R^t = max(R^{t-1} + r^t, 0) (regret matching+), alternating updates (players in turn, each against the
           others' newest strategies), average weighted by t:  s(I, a) ∝ sum_t t pi_i^{sigma^t}(I) sigma^t(I, a)

The average strategy converges to a Nash equilibrium in two-player zero-sum games (NashConv O(1/sqrt T) for CFR;
CFR+ is faster in practice). With more players the average converges to a coarse correlated equilibrium only;
NashConv says how far from Nash it is:

    BR_i(sigma_{-i}) = max_{sigma_i} u_i(sigma_i, sigma_{-i}): bottom-up, at I the action
                       a* = argmax_a sum_{h in I} pi_{-i}(h) v_i(ha)                           `best_response_value`
    NashConv(sigma)  = sum_i [BR_i(sigma_{-i}) - u_i(sigma)] >= 0, 0 exactly at a Nash equilibrium   `nash_conv`

(two-player zero-sum: exploitability = NashConv / 2, as in `kuhn.exploitability` and OpenSpiel).

Reference games with known equilibria (the tests' and notebooks' oracles): `kuhn_tree()` (workbench.envs.games.kuhn,
whose closed-form equilibria and exact exploitability it reuses) and `card_game_tree()`, Myerson's card game, a
signalling game with a unique equilibrium in behaviour strategies (`CARD_GAME_EQUILIBRIUM`, value 1/3).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

CHANCE, TERMINAL = -1, -2  # `Tree.actor` of chance nodes and terminals; a decision node holds its player (>= 0)


class Terminal(NamedTuple):
    payoffs: tuple[float, ...]  # u_j(z) for every player j


class Chance(NamedTuple):
    outcomes: tuple[tuple[str, float], ...]  # (label, probability), probabilities summing to 1


class Decision(NamedTuple):
    player: int
    infoset: str  # the information set's name: equal names = indistinguishable histories for `player`
    actions: tuple[str, ...]  # legal action labels, the same at every history of the set


Node = Callable[[tuple], Terminal | Chance | Decision]


class Level(NamedTuple):
    """The M edges from the nodes at one depth to their children, in node order (a node's edges are contiguous)."""

    parent: np.ndarray    # [M] node the edge leaves
    slot: np.ndarray      # [M] which action (or chance outcome) of the parent it is
    child: np.ndarray     # [M] node it reaches
    chance: np.ndarray    # [M] the outcome's probability on a chance edge, 0 on a decision edge
    decision: np.ndarray  # [M] True on a decision edge
    starts: np.ndarray    # [P] the first edge of each parent (np.add.reduceat's segments)
    heads: np.ndarray     # [P] those parents


@dataclass(frozen=True)
class Tree:
    """A game tree in breadth-first order, the root node 0, as its edges level by level. A = the most actions at
    any decision node; I = the number of information sets."""

    players: int
    actor: np.ndarray     # [N] player at a decision node, CHANCE, or TERMINAL
    infoset: np.ndarray   # [N] information-set index at a decision node, -1 elsewhere
    payoff: np.ndarray    # [N, players] u_j at terminals, 0 elsewhere
    levels: tuple         # `Level`s, from the root's edges down
    names: tuple          # [I] information-set names
    actions: tuple        # [I] action labels of each set
    owner: np.ndarray     # [I] the player acting at each set
    legal: np.ndarray     # [I, A] True on a set's action slots
    first: np.ndarray     # [I] one node of each set (its player's own reach there is the set's)
    depth: np.ndarray     # [I] the depth of each set's nodes

    @property
    def index(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.names)}

    def __repr__(self) -> str:
        return (f"Tree(players={self.players}, nodes={len(self.actor)}, infosets={len(self.names)}, "
                f"terminals={int((self.actor == TERMINAL).sum())})")


def build(node: Node, players: int) -> Tree:
    """Enumerate the game breadth-first from the empty history; ValueError on an inconsistent game (a set whose
    player, actions or depth differ between its histories, chance probabilities not summing to 1, payoffs of the
    wrong length)."""
    actor, infoset, payoff = [], [], []
    names, sets, frontier, depth, levels = {}, [], [()], 0, []
    while frontier:
        base, nxt, edges = len(actor), [], ([], [], [], [])
        for offset, history in enumerate(frontier):
            here, moves = node(history), []
            if isinstance(here, Terminal):
                if len(here.payoffs) != players:
                    raise ValueError(f"terminal {history}: {len(here.payoffs)} payoffs for {players} players")
                actor.append(TERMINAL), infoset.append(-1), payoff.append(tuple(here.payoffs))
            elif isinstance(here, Chance):
                if abs(sum(p for _, p in here.outcomes) - 1) > 1e-9 or any(p < 0 for _, p in here.outcomes):
                    raise ValueError(f"chance node {history}: probabilities {here.outcomes} do not sum to 1")
                actor.append(CHANCE), infoset.append(-1), payoff.append((0.0,) * players)
                moves = list(here.outcomes)
            elif isinstance(here, Decision):
                if not 0 <= here.player < players or not here.actions:
                    raise ValueError(f"decision {history}: player {here.player} of {players}, actions {here.actions}")
                key = (here.player, tuple(here.actions), depth)
                i = names.setdefault(here.infoset, len(names))
                if i == len(sets):
                    sets.append((key, base + offset))
                elif sets[i][0] != key:
                    raise ValueError(f"information set {here.infoset!r}: (player, actions, depth) {key} at {history} "
                                     f"but {sets[i][0]} elsewhere; every history of a set needs the same ones")
                actor.append(here.player), infoset.append(i), payoff.append((0.0,) * players)
                moves = [(a, 0.0) for a in here.actions]
            else:
                raise TypeError(f"node({history}) returned {here!r}; expected Terminal, Chance or Decision")
            for k, (label, p) in enumerate(moves):
                edges[0].append(base + offset), edges[1].append(k), edges[2].append(base + len(frontier) + len(nxt))
                edges[3].append(p)
                nxt.append(history + (label,))
        if nxt:
            parent, slot, child, chance = (np.asarray(x) for x in edges)
            starts = np.flatnonzero(np.r_[True, parent[1:] != parent[:-1]])
            levels.append(Level(parent, slot, child, chance.astype(np.float64),
                                np.asarray(infoset)[parent] >= 0, starts, parent[starts]))
        frontier, depth = nxt, depth + 1
    A = max([len(acts) for (_, acts, _), _ in sets], default=1)
    legal = np.zeros((len(sets), A), dtype=bool)
    for i, ((_, acts, _), _) in enumerate(sets):
        legal[i, :len(acts)] = True
    return Tree(players=players, actor=np.asarray(actor, dtype=np.int64), infoset=np.asarray(infoset, dtype=np.int64),
                payoff=np.asarray(payoff, dtype=np.float64), levels=tuple(levels), names=tuple(names),
                actions=tuple(acts for (_, acts, _), _ in sets),
                owner=np.asarray([p for (p, _, _), _ in sets], dtype=np.int64), legal=legal,
                first=np.asarray([n for _, n in sets], dtype=np.int64),
                depth=np.asarray([d for (_, _, d), _ in sets], dtype=np.int64))


# ------------------------------------------------------------------------------------ strategies


def uniform(tree: Tree) -> np.ndarray:
    """[I, A] every legal action equally likely."""
    return tree.legal / tree.legal.sum(1, keepdims=True)


def regret_matching(regrets: np.ndarray, legal: np.ndarray) -> np.ndarray:
    """[I, A] sigma(I, a) = R_+(I, a) / sum_b R_+(I, b); uniform over the legal actions where no regret is positive."""
    positive = np.where(legal, np.maximum(regrets, 0.0), 0.0)
    total = positive.sum(1, keepdims=True)
    return np.where(total > 0, positive / np.where(total > 0, total, 1.0), legal / legal.sum(1, keepdims=True))


def normalized(strategy_sum: np.ndarray, legal: np.ndarray) -> np.ndarray:
    """[I, A] a strategy sum divided by its row total (uniform where the set was never reached)."""
    return regret_matching(strategy_sum, legal)


def check_strategy(tree: Tree, sigma) -> np.ndarray:
    """sigma as float64 [I, A]; ValueError unless each row is a distribution over its set's legal actions."""
    sigma = np.asarray(sigma, dtype=np.float64)
    if sigma.shape != tree.legal.shape:
        raise ValueError(f"a strategy is [information sets, actions] = {tree.legal.shape}, got {sigma.shape}")
    if (sigma < 0).any() or (sigma[~tree.legal] != 0).any() or np.abs(sigma.sum(1) - 1).max() > 1e-9:
        raise ValueError("each row of a strategy must be a distribution over its set's legal actions")
    return sigma


def edge_probs(tree: Tree, sigma: np.ndarray) -> list[np.ndarray]:
    """Per level, [M] the probability of each edge: chance's, or sigma at the parent's set."""
    out = []
    for lv in tree.levels:
        at = np.where(lv.decision, tree.infoset[lv.parent], 0), np.where(lv.decision, lv.slot, 0)  # chance: unread
        out.append(np.where(lv.decision, sigma[at], lv.chance))
    return out


def reach(tree: Tree, probs: list[np.ndarray]) -> np.ndarray:
    """[N, players + 1] each player's own reach pi_i(h) (column players: chance's), root first."""
    r = np.ones((len(tree.actor), tree.players + 1))
    column = np.where(tree.actor == CHANCE, tree.players, tree.actor)
    for lv, p in zip(tree.levels, probs):
        r[lv.child] = r[lv.parent]
        r[lv.child, column[lv.parent]] *= p
    return r


def values(tree: Tree, probs: list[np.ndarray]) -> np.ndarray:
    """[N, players] expected payoffs below each node, v_j(h) = sum_a p(h, a) v_j(ha)."""
    v = tree.payoff.copy()
    for lv, p in zip(reversed(tree.levels), reversed(probs)):
        v[lv.heads] = np.add.reduceat(p[:, None] * v[lv.child], lv.starts, axis=0)
    return v


def others_reach(r: np.ndarray, player: np.ndarray) -> np.ndarray:
    """[M] pi_{-i}(h): the product of every column of r [M, players + 1] but the acting player's."""
    rest = r.copy()
    rest[np.arange(len(r)), player] = 1.0  # left out, not divided out: the own reach may be 0
    return rest.prod(1)


def regrets(tree: Tree, r: np.ndarray, v: np.ndarray, player: int | None = None) -> np.ndarray:
    """[I, A] instantaneous counterfactual regrets r(I, a) of every set (or only `player`'s)."""
    A = tree.legal.shape[1]
    out = np.zeros(len(tree.names) * A)
    for lv in tree.levels:
        keep = lv.decision if player is None else lv.decision & (tree.actor[lv.parent] == player)
        parent, slot, child = lv.parent[keep], lv.slot[keep], lv.child[keep]
        if not len(parent):
            continue
        i = tree.actor[parent]
        gain = others_reach(r[parent], i) * (v[child, i] - v[parent, i])
        out += np.bincount(tree.infoset[parent] * A + slot, weights=gain, minlength=len(out))
    return out.reshape(tree.legal.shape)


def own_reach(tree: Tree, r: np.ndarray) -> np.ndarray:
    """[I] pi_i(I): the owner's own reach at one node of each set (the same at all of them, by perfect recall)."""
    return r[tree.first, tree.owner]


def empirical(tree: Tree, moves, *, prior: float = 1.0) -> np.ndarray:
    """[I, A] a behaviour policy estimated from observed (set name, action label) moves: sigma(I, a) ∝ count(I, a) +
    prior over I's legal actions (a set never visited: uniform)."""
    if prior < 0:
        raise ValueError(f"prior must be >= 0 (add-prior smoothing of the counts), got {prior}")
    index, counts = tree.index, np.zeros(tree.legal.shape)
    for name, action in moves:
        if name not in index:
            raise ValueError(f"{name!r} is not an information set of this game (e.g. {tree.names[0]!r})")
        i = index[name]
        if action not in tree.actions[i]:
            raise ValueError(f"{action!r} is not an action at {name!r}; its actions: {tree.actions[i]}")
        counts[i, tree.actions[i].index(action)] += 1
    return normalized(np.where(tree.legal, counts + prior, 0.0), tree.legal)


# ------------------------------------------------------------------------------------ the solver


@dataclass
class Solution:
    average: np.ndarray  # [I, A] the average strategy (what converges)
    current: np.ndarray  # [I, A] the last iterate sigma^T
    trace: list          # (iteration, NashConv of the average) every `track` iterations


def cfr(tree: Tree, iterations: int, *, plus: bool = False, track: int = 0, init: np.ndarray | None = None) -> Solution:
    """`iterations` of CFR (plus=False: simultaneous updates, uniform average) or CFR+ (plus=True: regret matching+,
    alternating updates, linear average) from sigma^1 = `init` [I, A] (default uniform); `track` > 0 records
    NashConv of the average every `track` iterations."""
    if iterations < 1:
        raise ValueError(f"iterations must be >= 1, got {iterations}")
    R = np.zeros(tree.legal.shape)
    S = np.zeros(tree.legal.shape)
    sigma = uniform(tree) if init is None else check_strategy(tree, init)
    trace = []
    for t in range(1, iterations + 1):
        weight = t if plus else 1.0
        for group in (range(tree.players) if plus else (None,)):
            probs = edge_probs(tree, sigma)
            r = reach(tree, probs)
            v = values(tree, probs)
            mine = np.ones(len(tree.names), dtype=bool) if group is None else tree.owner == group
            S[mine] += weight * own_reach(tree, r)[mine, None] * sigma[mine]
            R += regrets(tree, r, v, group)
            if plus:
                R = np.maximum(R, 0.0)
            sigma = sigma.copy()
            sigma[mine] = regret_matching(R[mine], tree.legal[mine])  # the others keep theirs (CFR+: their turn next)
        if track and t % track == 0:
            trace.append((t, nash_conv(tree, normalized(S, tree.legal))))
    return Solution(normalized(S, tree.legal), sigma, trace)


# ------------------------------------------------------------------------------------ evaluation


def expected_values(tree: Tree, sigma: np.ndarray) -> np.ndarray:
    """[players] u_j(sigma): every player's expected payoff."""
    return values(tree, edge_probs(tree, sigma))[0]


def best_response_value(tree: Tree, sigma: np.ndarray, player: int) -> float:
    """BR_i(sigma_{-i}): bottom-up, `player` picks at each of its sets the action of highest counterfactual value
    sum_{h in I} pi_{-i}(h) v_i(ha) (a tie goes to the first action); everyone else plays sigma."""
    if not 0 <= player < tree.players:
        raise ValueError(f"player must be 0..{tree.players - 1}, got {player}")
    probs = edge_probs(tree, sigma)
    w = others_reach(reach(tree, probs), np.full(len(tree.actor), player))  # [N] pi_{-i}(h)
    v = tree.payoff[:, player].copy()
    for lv, p in zip(reversed(tree.levels), reversed(probs)):
        mine = tree.actor[lv.parent] == player
        # everyone else's nodes (and chance's): their expectation; the player's: 0 here, its choice below
        v[lv.heads] = np.add.reduceat(np.where(mine, 0.0, p) * v[lv.child], lv.starts)
        if mine.any():
            parent, slot, child = lv.parent[mine], lv.slot[mine], lv.child[mine]
            q = np.zeros(tree.legal.shape)
            np.add.at(q, (tree.infoset[parent], slot), w[parent] * v[child])
            best = np.where(tree.legal, q, -np.inf).argmax(1)  # [I]; only this level's sets are read
            chosen = slot == best[tree.infoset[parent]]
            v[parent[chosen]] = v[child[chosen]]
    return float(v[0])


def nash_conv(tree: Tree, sigma: np.ndarray) -> float:
    """sum_i [BR_i(sigma_{-i}) - u_i(sigma)]: >= 0, and 0 exactly at a Nash equilibrium."""
    u = expected_values(tree, sigma)
    return float(sum(best_response_value(tree, sigma, i) - u[i] for i in range(tree.players)))


def as_dict(tree: Tree, sigma: np.ndarray) -> dict[str, dict[str, float]]:
    """{information set: {action: probability}}."""
    return {name: {a: float(sigma[i, k]) for k, a in enumerate(tree.actions[i])} for i, name in enumerate(tree.names)}


def from_dict(tree: Tree, strategy: Mapping) -> np.ndarray:
    """[I, A] from {information set: {action: probability}}; a set left out plays uniformly."""
    sigma = uniform(tree)
    unknown = sorted(set(strategy) - set(tree.names))
    if unknown:
        raise ValueError(f"information sets {unknown[:5]} are not in the game; its sets: {list(tree.names)[:10]} ...")
    for i, name in enumerate(tree.names):
        if name in strategy:
            dist = strategy[name]
            if set(dist) - set(tree.actions[i]) or abs(sum(dist.values()) - 1) > 1e-9:
                raise ValueError(f"{name}: a distribution over {tree.actions[i]} summing to 1, got {dict(dist)}")
            sigma[i] = [float(dist.get(a, 0.0)) for a in tree.actions[i]] + [0.0] * (tree.legal.shape[1] -
                                                                                  len(tree.actions[i]))
    return sigma


# ------------------------------------------------------------------------------------ reference games


def kuhn_tree() -> Tree:
    """Kuhn poker (workbench.envs.games.kuhn): one chance node dealing the 6 card pairs, then the betting; sets
    named as in kuhn.py ("J", "Qpb", "Kb", ...), actions "p" and "b"."""
    from workbench.envs.games import kuhn

    def node(history):
        if not history:
            return Chance(tuple((f"{c0}{c1}", float(kuhn.CHANCE)) for c0, c1 in kuhn.DEALS))
        cards, bets = (int(history[0][0]), int(history[0][1])), "".join(history[1:])
        if kuhn.is_terminal(bets):
            u0 = float(kuhn.payoff(cards, bets))
            return Terminal((u0, -u0))
        player = kuhn.to_act(bets)
        return Decision(player, kuhn.infoset(cards[player], bets), kuhn.ACTIONS)

    return build(node, 2)


# Myerson's card game (R. B. Myerson, "Game Theory: Analysis of Conflict", Harvard University Press 1991: the game in
# sec. 2.1, its randomized equilibrium in ch. 3; the book's running example of incomplete information): both players put
# 1 in the pot; player 0 draws a red or a black card (1/2 each) and sees it; it folds (shows the card: red wins the
# pot, +1, black loses it, -1) or raises (adds 1); player 1 then passes (player 0 wins, +1) or meets (adds 1; red
# wins +2, black loses -2). Unique equilibrium: raise red always, raise black with 1/3 (a bluff), meet with 2/3
# (player 1 indifferent when P(red | raise) = 3/4, player 0 with black when 1 - 3m = -1); value 1/3 to player 0.
CARD_GAME_EQUILIBRIUM = {"red": {"raise": 1.0, "fold": 0.0}, "black": {"raise": 1 / 3, "fold": 2 / 3},
                         "raised": {"meet": 2 / 3, "pass": 1 / 3}}
CARD_GAME_VALUE = 1 / 3  # player 0's


def card_game_tree() -> Tree:
    """Myerson's card game: sender (player 0) sets "red" / "black" with actions raise, fold; receiver (player 1)
    set "raised" with actions meet, pass."""
    def node(history):
        if not history:
            return Chance((("red", 0.5), ("black", 0.5)))
        card, moves = history[0], history[1:]
        sign = 1.0 if card == "red" else -1.0
        if not moves:
            return Decision(0, card, ("raise", "fold"))
        if moves == ("fold",):
            return Terminal((sign, -sign))
        if moves == ("raise",):
            return Decision(1, "raised", ("meet", "pass"))
        u0 = 1.0 if moves[1] == "pass" else 2 * sign
        return Terminal((u0, -u0))

    return build(node, 2)
