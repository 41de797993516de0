"""Kuhn poker as a two-agent text game, evaluated exactly: exploitability against the best response.

The rules, payoffs and solution are `workbench.envs.games.kuhn`'s (three cards J < Q < K, ante 1, one bet of 1;
player 0 acts first). Agent k is player k. Each agent's row, e.g. player 0 holding Q, player 1 holding K:

    player 0   prompt "P0 Q:"     action "p"   observation "b"   action "b"        check, (bet), call: loses 2
    player 1   prompt "P1 K:p"    action "b"                                       (check), bet: wins 2

An action is one letter, "p" (pass: check or fold) or "b" (bet or call); both are stop strings, so a sampled turn
ends at the first of them. Anything else is illegal, a space before the letter included (the evaluation reads the
letters' probabilities, so a leniency here would hide what the policy does): the mover forfeits the hand (reward -1, the other +1, as if it
had folded; `kuhn.step`), pays `illegal_penalty` more (default 1: without it an illegal answer facing a bet costs
what a fold costs, and a policy drifts into it for free, measured: 24 % illegal mass after 150 self-play steps) and
is told so in an observation. Rewards come at the end of the hand, one per agent: u_0 and -u_0 (zero-sum, except
for the penalty).

Evaluation is exact: the policy's probability of "b" and "p" at each of the 12 information sets is read off the
model (the action tokens' probabilities after that information set's context, encoded as the rollout encodes it),
renormalized over the two legal actions (the rest, `illegal`, is reported), and the strategy pair's
exploitability (NashConv / 2, `kuhn.exploitability`) computed in closed form: 0 at a Nash equilibrium, 11/24 = 0.458
for the uniform strategy. The accuracy is 1 - exploitability / 0.458 (clipped at 0): the share of the uniform
strategy's exploitability removed. Also exact: the expected chips per hand against the scripted player (seats
alternating; the uniform strategy -0.042, a Nash one 0.0, a best response to it more).

Python players: "random" (each action with probability 1/2), "solver" (a Nash equilibrium, `kuhn.nash_strategy`
with alpha = 1/6 for player 0), "scripted" (bets and calls with K only: easy to exploit).
"""
from __future__ import annotations

import random
from fractions import Fraction

from workbench import registry
from workbench.envs.base import check_knob_rules, tool, user
from workbench.envs.games import kuhn
from workbench.envs.multiagent import GameTask, MultiAgentEnv
from workbench.tasks.base import Example

SOLVER_ALPHA = Fraction(1, 6)  # player 0's free parameter in the equilibrium family [0, 1/3]: the middle
UNIFORM_EXPLOITABILITY = float(kuhn.exploitability(kuhn.uniform_strategy(0), kuhn.uniform_strategy(1)))  # 11/24


def view(player: int, card: int) -> str:
    return f"P{player} {kuhn.CARDS[card]}:"


def scripted_strategy(player: int) -> dict:
    """Bet or call with K, otherwise check or fold."""
    return {name: int(name[0] == "K") for name in kuhn.INFOSETS[player]}


STRATEGIES = {"random": kuhn.uniform_strategy, "scripted": scripted_strategy,
              "solver": lambda player: kuhn.nash_strategy(SOLVER_ALPHA)[player]}


def strategy_player(name: str):
    """A Python player drawing its action from the named strategy at the mover's information set."""
    def act(env: KuhnEnv, rng: random.Random) -> str:
        player = kuhn.to_act(env.history)
        q = kuhn.bet_probability(STRATEGIES[name](player), kuhn.infoset(env.cards[player], env.history))
        return "b" if rng.random() < q else "p"
    return act


class KuhnEnv(MultiAgentEnv):
    agents = ("player0", "player1")
    stop = kuhn.ACTIONS
    max_turns = 2  # player 0 acts at most twice (p, then facing a bet), player 1 once
    players = {name: strategy_player(name) for name in STRATEGIES}

    def __init__(self, task=None):
        self.task, self.cards, self.history, self.done = task, None, "", False
        self.penalty = task.illegal_penalty if task is not None else 1.0

    def reset(self, example: Example, seed: int | None = None):
        self.cards = deal_of(example)
        self.history, self.done = "", False
        return [[user(view(k, self.cards[k]))] for k in range(2)], {"state": self.state()}

    def state(self) -> str | None:
        return None if self.done else kuhn.infoset(self.cards[kuhn.to_act(self.history)], self.history)

    def to_move(self) -> int | None:
        return None if self.done else kuhn.to_act(self.history)

    def step(self, action: str):
        if self.cards is None:
            raise RuntimeError("step before reset")
        mover = self.to_move()
        if mover is None:
            return [[], []], [0.0, 0.0], True, {"state": None, "tool_error": "the hand is over"}
        result = kuhn.step(self.cards, self.history, action)  # exactly "p" or "b": the letters evaluation reads
        self.history, self.done = result.history, result.done
        observations = [[], []]
        if result.illegal:
            observations[mover] = [tool(f" illegal: {result.illegal}")]
        else:
            observations[1 - mover] = [tool(action)]
        rewards = [float(r) for r in result.rewards] if result.rewards else [0.0, 0.0]
        if result.illegal:
            rewards[mover] -= self.penalty
        return observations, rewards, self.done, {"state": self.state(), "tool_error": result.illegal}


def deal_of(example: Example) -> tuple[int, int]:
    return kuhn.CARDS.index(example.answer[0]), kuhn.CARDS.index(example.answer[1])


def infoset_context(name: str):
    """(prompt messages, [(own action, observations after it)]) that a row holds when it acts at information set
    `name`: what the rollout has given the model by then."""
    card, history = kuhn.CARDS.index(name[0]), name[1:]
    player = kuhn.to_act(history)
    if player == 0:  # "" or "pb": its own "p", then the opponent's "b"
        return [user(view(0, card))], ([("p", [tool("b")])] if history else [])
    return [user(view(1, card)), tool(history)], []  # the opponent's first action arrives before its first turn


KUHN_LOGS = {
    "eval/exploitability": ("Exact exploitability (NashConv / 2, chips per hand) of the policy's strategy pair, read off "
                            "the model at Kuhn poker's 12 information sets (only on evaluation steps).",
                            "Falls towards 0 (a Nash equilibrium); 0.458 for the uniform strategy. Flat: the policy is "
                            "not learning the game; rising: it is drifting to an exploitable pure strategy."),
    "eval/illegal": ("Mean probability the policy gives an action other than p or b at an information set.",
                     "Near 0 after the warm start; rising: the format is breaking down."),
    "eval/payoff_vs_scripted": ("Exact expected chips per hand against the scripted player (bets and calls with K "
                                "only), seats alternating.",
                                "-0.042 for the uniform strategy, 0.0 for a Nash one; above 0: the policy exploits the "
                                "scripted player (which a best response beats by 0.25 a hand on average)."),
}


@registry.env(
    "kuhn", title="Kuhn poker, two agents, evaluated by exact exploitability", family="multiagent",
    summary="Three cards, ante 1, one bet: each agent sees its card and the other's actions and answers 'p' (pass) "
            "or 'b' (bet); illegal actions forfeit. Evaluated exactly: exploitability (NashConv / 2) of the policy's "
            "strategy read off the model at the 12 information sets.", logs=KUHN_LOGS)
class KuhnTask(GameTask):
    """Examples are the six deals, drawn uniformly (each a prompt group: rows of one deal share their cards).

    Knobs (`task_kw`): expert, the Python player whose hands warm-start the policy ("random": the uniform strategy,
    exploitability 0.458; "scripted"; "solver"); illegal_penalty, what an illegal action costs beyond the forfeit (1)."""

    name = "kuhn"
    accuracy_is = "1 - exploitability / the uniform strategy's"

    def __init__(self, *, expert: str = "random", illegal_penalty: float = 1.0):
        check_knob_rules("kuhn", [(expert not in STRATEGIES, f"expert one of {sorted(STRATEGIES)}, got {expert!r}"),
                                  (illegal_penalty < 0, f"illegal_penalty >= 0, got {illegal_penalty}")])
        self.expert, self.illegal_penalty = expert, float(illegal_penalty)

    def make_example(self, rng: random.Random) -> Example:
        c0, c1 = rng.choice(kuhn.DEALS)
        deal = kuhn.CARDS[c0] + kuhn.CARDS[c1]
        return Example(prompt=view(0, c0), answer=deal, target="")

    def make_env(self) -> KuhnEnv:
        return KuhnEnv(self)

    def strategies(self, policy) -> tuple[list[dict], float]:
        """The policy's two strategies (probability of "b" at each information set, renormalized over p and b) and
        its mean probability of an illegal action over the 12 information sets."""
        names = [name for player in (0, 1) for name in kuhn.INFOSETS[player]]
        probs = policy.action_probs(self, [infoset_context(name) for name in names], list(kuhn.ACTIONS),
                                    [kuhn.to_act(name[1:]) for name in names])  # [12, 2]: p, b
        legal = [p + b for p, b in probs]
        q = {name: b / max(total, 1e-12) for name, (_, b), total in zip(names, probs, legal)}
        return [{n: q[n] for n in kuhn.INFOSETS[k]} for k in (0, 1)], 1.0 - sum(legal) / len(legal)

    def evaluate(self, policy) -> tuple[float, list[dict], dict]:
        """(accuracy = 1 - exploitability / the uniform strategy's, clipped at 0: 0 for the uniform strategy, 1 at a
        Nash equilibrium; per-information-set records; {exploitability, illegal, payoff_vs_scripted})."""
        (s0, s1), illegal = self.strategies(policy)
        scripted = [scripted_strategy(0), scripted_strategy(1)]
        exploitability = float(kuhn.exploitability(s0, s1))
        payoff = float(kuhn.expected_value(s0, scripted[1]) - kuhn.expected_value(scripted[0], s1)) / 2
        metrics = {"exploitability": exploitability, "illegal": illegal, "payoff_vs_scripted": payoff}
        records = [{"infoset": name, "bet": float(q)} for s in (s0, s1) for name, q in s.items()]
        return max(0.0, 1.0 - exploitability / UNIFORM_EXPLOITABILITY), records, metrics
