"""Werewolf, one day: a hidden-role deduction game for 3 or 4 players, and its latent (abstract) game, small enough to
solve exactly with CFR (`workbench.envs.games.cfr`), for LSPO.

Rules. Seats P0..P{n-1}. A deal: one wolf (seat w), one seer (seat s != w), the rest villagers; the seer has peeked
at one other seat t != s and knows whether it is the wolf. Each player knows only its own seat and role (the wolf
does not know who the seer is). One day: every seat in turn (P0 first) makes one statement, free text of at most
`max_chars` characters heard by all; then every seat in turn votes for another seat, the votes hidden until all are
cast. The seat with strictly the most votes is out (a tie: nobody). The village wins iff the wolf is out:

    villagers and seer: +1 each if the wolf is out, else -1;   wolf: -1 if it is out, else +1

(a team game, not zero-sum: the brief's +1 each / -1; the reward arrives with the last vote). The deal is the
example's: `make_example` draws a game number g in 100..999 and the deal is a fixed function of g (`deal_of`), so
"G417" always deals the same roles and a group of episodes of one example plays one deal. Statements are cheap
talk: the game never reads them; they matter through how the other players read them.

Format (character level; every turn ends at the stop string "\\n", kept in the action's text). Agent k's opening
view is one user message, its private information (P0's ends with its first cue):

    "P1/3 seer P2=wolf\\n"       "P0/3 wolf\\nP0: "       "P2/3 villager\\n"
    statement (after the cue "P{k}: ")   "seer P2=wolf\\n"    everyone else then sees "P1: seer P2=wolf\\n"
    vote      (after the cue "vote: ")   "P2\\n"              (also "2", "p2"); nobody sees it until the end
    the end, to everyone                 "votes: P0>P2 P1>P2 P2>P0\\nout: P2 (wolf)\\nvillage wins\\n"

The cue for the next mover ("P{k+1}: " while the talk lasts, "vote: " after) ends that mover's observation.

Illegal actions (never a crash; each costs the mover `penalty`, subtracted from its reward at that step, and it gets
an observation saying so, starting with "!"; info["tool_error"] says why): a statement of more than one line or
longer than `max_chars` is cut (others hear its first line's first `max_chars` characters, stripped); a vote that is
not another seat's number is counted as no vote. A step after the game is over changes nothing and says so.

info (reset and every step): "state" (phase, statements heard so far, votes cast), "phase" ("talk" / "vote" /
"over": the next action's), "mover" (who just acted), "to_move", "tool_error"; at the end also "roles" (each seat's),
"votes" (None: no vote), "out" and "winner" ("village" / "wolf").

Python players (`players`): "random" (a random statement of the scripted kinds about random seats, a random vote for
another seat) and "scripted" (the expert: the seer tells its peek, "seer P{t}=wolf|good"; villagers say
"villager"; the wolf, with probability `bluff`, claims to be the seer and accuses the seat that claimed seer before
it, else a random other seat, and otherwise says "villager"; votes go to a random seat that could be the wolf given
every claim heard under that convention, `suspects`; the wolf votes for a seat that accused it). Both read only the
mover's own view. With 3 players the scripted village wins 83% of games (bluff 0.5; 100% when the wolf never
bluffs, 63% when it always does); with 4, 69%. `WerewolfTask.expert_game(example, seed)` is the game the expert
plays in every seat, move by move: what the SFT warm start (`rollout.agents.expert_rows`) encodes, one row per seat.

Latent game (LSPO's abstraction, `latent_game(players, k)`): the same deals (chance), each statement replaced by its
latent intent c in 0..k-1 (a cluster of utterances, public like the text), the votes as they are. Seat k's sets:

    talk  "P{k} {private} |{c_0}-...-{c_{k-1}}"         actions "0".."k-1"   (the intents heard so far)
    vote  "P{k} {private} |{c_0}-...-{c_{n-1}}|vote"    actions "P{j}", j != k (other votes unseen)

with {private} the text of the opening view ("seer P2=wolf", "wolf", "villager"). `WerewolfEnv.latent_infoset`
names the set of the seat to move in a real game given the intents of the statements so far, and
`WerewolfEnv.latent_moves` a played game's moves in the latent game, so a solved latent policy reads off the
probability of any utterance's intent where it was said. Trees: 12 k^3 * 8 terminals for 3 players (k = 4: 6,144;
100 CFR+ iterations in about a second), 36 k^4 * 81 for 4 (k = 2: 46,656; about 0.06 s an iteration).

The intents are cheap talk: relabelling them is a symmetry of the latent game, so CFR started at the uniform
strategy never breaks it, keeps every intent equally likely and converges to a babbling equilibrium in which talk
is ignored (the village wins 1/2 with 3 players, whatever k). LSPO's latent policy (`solve_latent`, for a task
`WerewolfTask.latent_solution`: the policy, its NashConv and the village's chance of winning) therefore
starts CFR at the behaviour policy: the intents and votes the players actually chose, counted per set (add-one
smoothing), so the intents keep the meaning the language gave them and CFR moves from there (3 players, the
scripted players' statements clustered into k = 2, 3 or 4 intents: 200 CFR+ iterations reach NashConv < 1e-3 at an
equilibrium where the village wins 2/3). This start is our reading; the paper says only that the abstracted game is
solved by CFR.
"""
from __future__ import annotations

import random
import re
from typing import NamedTuple, Sequence

from workbench import registry
from workbench.envs.base import check_knob_rules, check_knob_types, knob_kinds, tool, user
from workbench.envs.games import cfr
from workbench.envs.multiagent import GameTask, MultiAgentEnv, seat_rng
from workbench.tasks.base import Example

WOLF, SEER, VILLAGER = "wolf", "seer", "villager"
STOP = "\n"
LOWEST_GAME, HIGHEST_GAME = 100, 999
CLAIM = re.compile(r"seer P(\d+)=(wolf|good)")  # a seer claim inside a statement
VOTE = re.compile(r"\s*[Pp]?(\d+)\s*")           # a vote: a seat number, with or without its P


class Deal(NamedTuple):
    wolf: int
    seer: int
    peek: int  # the seat the seer peeked at


def deals(players: int) -> list[Deal]:
    """Every deal of a game of `players` seats: n (n - 1)^2 of them, equally likely."""
    return [Deal(w, s, t) for w in range(players) for s in range(players) if s != w
            for t in range(players) if t != s]


def deal_of(game: int, players: int) -> Deal:
    """Game number -> its deal, uniform over `deals(players)` and fixed by the number."""
    return random.Random(f"werewolf-{players}-{game}").choice(deals(players))


def role(deal: Deal, seat: int) -> str:
    return WOLF if seat == deal.wolf else SEER if seat == deal.seer else VILLAGER


def private_info(deal: Deal, seat: int) -> str:
    """What `seat` knows: its role, and the seer its peek ("seer P2=wolf" / "seer P2=good")."""
    if seat == deal.seer:
        return f"{SEER} P{deal.peek}={WOLF if deal.peek == deal.wolf else 'good'}"
    return role(deal, seat)


def opening(deal: Deal, seat: int, players: int) -> str:
    return f"P{seat}/{players} {private_info(deal, seat)}\n" + (talk_cue(0) if seat == 0 else "")


def talk_cue(seat: int) -> str:
    return f"P{seat}: "


VOTE_CUE = "vote: "


def parse_answer(answer: str) -> tuple[int, Deal]:
    """(players, deal) from an example's answer "players|wolf|seer|peek"."""
    n, w, s, t = (int(x) for x in answer.split("|"))
    return n, Deal(w, s, t)


def wolf_out(votes: Sequence[int | None], players: int) -> int | None:
    """The seat with strictly the most votes (None: a tie, or no votes); None votes are abstentions."""
    counts = [sum(v == seat for v in votes) for seat in range(players)]
    top = max(counts)
    return counts.index(top) if top > 0 and counts.count(top) == 1 else None


def payoffs(deal: Deal, out: int | None, players: int) -> list[float]:
    """+1 to every non-wolf and -1 to the wolf if the wolf is out, the opposite otherwise."""
    village = 1.0 if out == deal.wolf else -1.0
    return [-village if seat == deal.wolf else village for seat in range(players)]


def clean_statement(action: str, max_chars: int) -> tuple[str, str | None]:
    """(what the others hear, why the statement was illegal or None): the first line, stripped, at most max_chars."""
    text = action[:-len(STOP)] if action.endswith(STOP) else action
    lines = text.split(STOP)
    heard, problem = lines[0].strip(), None
    if len(lines) > 1:
        problem = "a statement is one line"
    if len(heard) > max_chars:
        heard, problem = heard[:max_chars].rstrip(), f"a statement has at most {max_chars} characters"
    return heard, problem


def parse_vote(action: str, seat: int, players: int) -> tuple[int | None, str | None]:
    """(the seat voted for, or None with why the vote is illegal)."""
    text = action[:-len(STOP)] if action.endswith(STOP) else action
    match = VOTE.fullmatch(text)
    target = int(match.group(1)) if match else None
    if target is None or not 0 <= target < players or target == seat:
        others = " ".join(f"P{j}" for j in range(players) if j != seat)
        return None, f"{text!r} is not a vote: write another seat ({others})"
    return target, None


# ------------------------------------------------------------------------------------ scripted reasoning


def claims(statements: Sequence[str]) -> dict[int, tuple[int, bool]]:
    """{speaker: (peeked seat, is wolf)} of the statements that claim the seer's peek."""
    out = {}
    for speaker, text in enumerate(statements):
        match = CLAIM.search(text)
        if match:
            out[speaker] = (int(match.group(1)), match.group(2) == WOLF)
    return out


def suspects(seat: int, private: str, statements: Sequence[str], players: int) -> list[int]:
    """The other seats that could be the wolf given `seat`'s own knowledge and every claim heard, under the scripted
    convention (the seer claims its peek, truthfully; no other honest seat claims): x is a suspect iff, with x the
    wolf, the honest seats that have spoken hold exactly one seer claim when `seat` is a villager (none when it is
    the seer; none needed while the seer may still speak) and every honest claim, and the seer's own peek, is true.
    When no seat fits, the same without "the seer claims" (a silent seer); when still none (an honest seat broke the
    convention), the seats the seer's own peek allows; then every other seat."""
    others = [x for x in range(players) if x != seat]
    if private == WOLF:
        return others
    said = {c: claim for c, claim in claims(statements).items() if c != seat}  # one's own words prove nothing
    peek = claims([private]).get(0)  # the seer's own knowledge, read as a claim it knows to be true

    def fits(x: int, seer_claims: bool) -> bool:
        honest = [c for c in said if c != x]
        silent = [j for j in range(len(statements), players) if j not in (x, seat)]  # may still claim
        seers = len(honest) + (peek is not None)
        if seers > 1 or (seer_claims and seers == 0 and not silent):
            return False  # two honest seers, or the seer never claimed
        return all((t == x) == is_wolf for t, is_wolf in [said[c] for c in honest] + ([peek] if peek else []))

    own = [x for x in others if peek is None or (peek[0] == x) == peek[1]]
    return [x for x in others if fits(x, True)] or [x for x in others if fits(x, False)] or own or others


def scripted_statement(seat: int, private: str, statements: Sequence[str], players: int, bluff: float,
                       rng: random.Random) -> str:
    if private.startswith(SEER):
        return private
    if private == VILLAGER or rng.random() >= bluff:
        return VILLAGER
    claimed = [c for c in claims(statements) if c != seat]
    target = claimed[0] if claimed else rng.choice([x for x in range(players) if x != seat])
    return f"{SEER} P{target}={WOLF}"


def scripted_vote(seat: int, private: str, statements: Sequence[str], players: int, rng: random.Random) -> int:
    if private == WOLF:
        accusers = [c for c, (t, is_wolf) in claims(statements).items() if c != seat and t == seat and is_wolf]
        return accusers[0] if accusers else rng.choice([x for x in range(players) if x != seat])
    return rng.choice(suspects(seat, private, statements, players))


def random_action(env: "WerewolfEnv", rng: random.Random) -> str:
    """A random statement of the scripted kinds about a random seat, or a vote for a random other seat."""
    seat = env.to_move()
    if env.phase == "talk":
        x = rng.choice([j for j in range(env.n) if j != seat])
        text = rng.choice([VILLAGER, f"{SEER} P{x}={WOLF}", f"{SEER} P{x}=good"])
        return text + STOP
    return f"P{rng.choice([j for j in range(env.n) if j != seat])}" + STOP


def scripted_action(env: "WerewolfEnv", rng: random.Random) -> str:
    """The expert's action for the seat to move, from that seat's view only (its private line, the statements)."""
    seat = env.to_move()
    private = private_info(env.deal, seat)
    if env.phase == "talk":
        return scripted_statement(seat, private, env.statements, env.n, env.task.bluff, rng) + STOP
    return f"P{scripted_vote(seat, private, env.statements, env.n, rng)}" + STOP


# ------------------------------------------------------------------------------------ task and environment


@registry.env(
    "werewolf", title="Werewolf, one day: a hidden-role deduction game with cheap talk", family="multiagent",
    summary="3-4 seats, one wolf, one seer who knows whether one other seat is the wolf; every seat makes one "
            "free-text statement, then votes; the village (+1 each) wins iff the wolf gets the most votes. "
            "Multi-agent (one row per seat); its latent game is solved exactly by CFR for LSPO.")
class WerewolfTask(GameTask):
    """One day of werewolf, the deal fixed by the example's game number.

    Knobs (`task_kw`): players (3 or 4, 3); max_chars (the longest statement, 8..200, 32); penalty (what an illegal
    action costs its mover, >= 0, 1.0); bluff (the scripted wolf's probability of a false seer claim, in [0, 1],
    0.5); expert (the Python player whose games warm-start the policy, "scripted" or "random"). Examples: prompt
    "G{g}" (g in 100..999), answer "players|wolf|seer|peek", target "" (a game has no single answer).

    Evaluation (`evaluate`): on one example per deal (`deal_examples`), the policy plays each seat once against
    scripted players; accuracy = the share of those games it wins (a positive return: a win with an illegal action
    whose penalty eats it does not count); metrics: win rates as villager or seer (`win_rate_village`) and as wolf
    (`win_rate_wolf`), and the share of games with an illegal action (`illegal`).
    """

    name = "werewolf"

    def __init__(self, *, players: int = 3, max_chars: int = 32, penalty: float = 1.0, bluff: float = 0.5,
                 expert: str = "scripted"):
        check_knob_types("werewolf", locals(), knob_kinds(WerewolfTask))
        check_knob_rules("werewolf", [
            (players not in (3, 4), f"players 3 or 4 (a latent game small enough to solve exactly), got {players}"),
            (not 8 <= max_chars <= 200, f"8 <= max_chars <= 200 (a seer claim takes 12), got {max_chars}"),
            (not 0 <= penalty < float("inf"), f"penalty >= 0 and finite (what an illegal action costs), got {penalty}"),
            (not 0 <= bluff <= 1, f"0 <= bluff <= 1 (a probability), got {bluff}"),
            (expert not in WerewolfEnv.players, f"expert one of {sorted(WerewolfEnv.players)}, got {expert!r}"),
        ])
        self.players, self.max_chars, self.penalty, self.bluff = players, max_chars, penalty, bluff
        self.expert = expert
        self.max_turns = 2  # a statement and a vote per seat

    def make_example(self, rng: random.Random) -> Example:
        return self.example(rng.randint(LOWEST_GAME, HIGHEST_GAME))

    def example(self, game: int) -> Example:
        deal = deal_of(game, self.players)
        return Example(prompt=f"G{game}", answer=f"{self.players}|{deal.wolf}|{deal.seer}|{deal.peek}", target="")

    def deal_examples(self) -> list[Example]:
        """One example per deal: the lowest game number dealing it."""
        first = {}
        for game in range(LOWEST_GAME, HIGHEST_GAME + 1):
            first.setdefault(deal_of(game, self.players), game)
        missing = [d for d in deals(self.players) if d not in first]
        if missing:
            raise RuntimeError(f"no game number in {LOWEST_GAME}..{HIGHEST_GAME} deals {missing}")
        return [self.example(first[d]) for d in deals(self.players)]

    def expert_game(self, example: Example, seed: int = 0) -> list[tuple[int, str]]:
        """(agent, action text) of every move of the game the expert Python player plays in every seat, in move
        order: the game `rollout.agents.expert_rows` encodes for the SFT warm start (the same random stream,
        `seat_rng(seed, "players")`, so the same moves)."""
        env = self.make_env()
        env.reset(example, seed)
        rng = seat_rng(seed, "players")
        moves = []
        while env.to_move() is not None:
            agent, action = env.to_move(), env.play(self.expert, rng)
            moves.append((agent, action))
            env.step(action)
        return moves

    def evaluate(self, policy) -> tuple[float, list[dict], dict]:
        records = []
        for example in self.deal_examples():
            _, deal = parse_answer(example.answer)
            for game in policy.play(self, example, opponent="scripted", games=self.players):
                records.append({"game": example.prompt, "seat": game["seat"], "role": role(deal, game["seat"]),
                                "return": game["return"], "won": game["return"] > 0, "illegal": game["illegal"]})

        def rate(rows, key="won"):
            return sum(r[key] for r in rows) / max(len(rows), 1)

        metrics = {"win_rate_village": rate([r for r in records if r["role"] != WOLF]),
                   "win_rate_wolf": rate([r for r in records if r["role"] == WOLF]),
                   "illegal": rate(records, "illegal")}
        return rate(records), records, metrics

    def latent_solution(self, k: int, moves=(), **kw) -> LatentSolution:
        """`solve_latent` for this task's number of seats (LSPO's data source calls this)."""
        return solve_latent(self.players, k, moves, **kw)

    def make_env(self) -> WerewolfEnv:
        return WerewolfEnv(self)

    def __repr__(self) -> str:
        return (f"WerewolfTask(players={self.players}, max_chars={self.max_chars}, penalty={self.penalty}, "
                f"bluff={self.bluff}, expert={self.expert!r})")


class WerewolfEnv(MultiAgentEnv):
    """One day of a WerewolfTask example (see the module docstring). Agents are the seats "P0".."P{n-1}"; roles
    vary with the deal (`role(k)`, and info["roles"] at the end)."""

    stop = (STOP,)
    players = {"random": random_action, "scripted": scripted_action}

    def __init__(self, task: WerewolfTask):
        self.task = task
        self.n = task.players
        self.agents = tuple(f"P{k}" for k in range(self.n))
        self.max_turns = task.max_turns
        self.deal, self.statements, self.votes, self.out = None, [], [], None

    @property
    def phase(self) -> str:
        if self.deal is None:
            return "new"
        return "talk" if len(self.statements) < self.n else "vote" if len(self.votes) < self.n else "over"

    def role(self, agent: int) -> str:
        return role(self.deal, agent)

    def reset(self, example: Example, seed: int | None = None):
        n, self.deal = parse_answer(example.answer)
        if n != self.n:
            raise ValueError(f"example {example.prompt!r} is a {n}-player game; this environment has {self.n} seats "
                             f"(task_kw players={n})")
        self.statements, self.votes, self.out = [], [], None
        views = [[user(opening(self.deal, k, self.n))] for k in range(self.n)]
        return views, self.info(None)

    def to_move(self) -> int | None:
        phase = self.phase
        return len(self.statements) if phase == "talk" else len(self.votes) if phase == "vote" else None

    def info(self, illegal: str | None, mover: int | None = None) -> dict:
        out = {"state": (self.phase, tuple(self.statements), len(self.votes)), "phase": self.phase,
               "mover": mover, "to_move": self.to_move(), "tool_error": illegal}
        if self.phase == "over":
            out.update(roles=[self.role(k) for k in range(self.n)], votes=list(self.votes), out=self.out,
                       winner="village" if self.out == self.deal.wolf else WOLF)
        return out

    def step(self, action: str):
        if self.deal is None:
            raise RuntimeError("step before reset")
        mover = self.to_move()
        if mover is None:
            return [[] for _ in range(self.n)], [0.0] * self.n, True, self.info("the game is over")
        text = [""] * self.n
        rewards = [0.0] * self.n
        if self.phase == "talk":
            heard, problem = clean_statement(action, self.task.max_chars)
            self.statements.append(heard)
            for j in range(self.n):
                if j != mover:
                    text[j] += f"{talk_cue(mover)}{heard}\n"
            if problem:
                text[mover] += f"! {problem}: the others heard {heard!r} (penalty {self.task.penalty:g})\n"
        else:
            target, problem = parse_vote(action, mover, self.n)
            self.votes.append(target)
            if problem:
                text[mover] += f"! {problem}; counted as no vote (penalty {self.task.penalty:g})\n"
        if problem:
            rewards[mover] -= self.task.penalty
        nxt = self.to_move()
        if nxt is not None:
            text[nxt] += talk_cue(nxt) if self.phase == "talk" else VOTE_CUE
        else:
            self.out = wolf_out(self.votes, self.n)
            rewards = [r + p for r, p in zip(rewards, payoffs(self.deal, self.out, self.n))]
            shown = " ".join(f"P{k}>{'-' if v is None else f'P{v}'}" for k, v in enumerate(self.votes))
            out = "none" if self.out is None else f"P{self.out} ({self.role(self.out)})"
            winner = "village" if self.out == self.deal.wolf else WOLF
            text = [t + f"votes: {shown}\nout: {out}\n{winner} wins\n" for t in text]
        observations = [[tool(t)] if t else [] for t in text]
        return observations, rewards, nxt is None, self.info(problem, mover)

    def latent_infoset(self, heard: Sequence[int]) -> str:
        """The latent game's set of the seat to move, given the latent intents of the statements made so far."""
        seat = self.to_move()
        if seat is None:
            raise ValueError("the game is over: nobody moves")
        if len(heard) != len(self.statements):
            raise ValueError(f"{len(heard)} intents for the {len(self.statements)} statements made so far")
        return latent_infoset(seat, private_info(self.deal, seat), heard, vote=self.phase == "vote")

    def latent_moves(self, intents: Sequence[int]) -> list[tuple[str, str]]:
        """The moves played so far as latent-game moves (set name, action label), given the intents of the statements
        (`intents[j]`: statement j's); illegal votes (no vote) have no latent move and are left out."""
        if len(intents) != len(self.statements):
            raise ValueError(f"{len(intents)} intents for the {len(self.statements)} statements made so far")
        heard = [int(c) for c in intents]
        moves = [(latent_infoset(j, private_info(self.deal, j), heard[:j]), str(heard[j])) for j in range(len(heard))]
        return moves + [(latent_infoset(j, private_info(self.deal, j), heard, vote=True), f"P{v}")
                        for j, v in enumerate(self.votes) if v is not None]


# ------------------------------------------------------------------------------------ the latent game


def latent_infoset(seat: int, private: str, heard: Sequence[int], vote: bool = False) -> str:
    """The latent game's set name: the seat, its private line, the intents heard (all of them when voting)."""
    return f"P{seat} {private} |{'-'.join(str(int(c)) for c in heard)}" + ("|vote" if vote else "")


def latent_game(players: int, k: int) -> cfr.Tree:
    """The werewolf day with each statement replaced by its latent intent in 0..k-1 (see the module docstring)."""
    if players not in (3, 4):
        raise ValueError(f"players must be 3 or 4, got {players}")
    if not 1 <= k <= 16:
        raise ValueError(f"k (latent intents) must be in 1..16 for a tree solvable here, got {k}")
    table = deals(players)
    intents = tuple(str(c) for c in range(k))

    def node(history):
        if not history:
            return cfr.Chance(tuple((str(i), 1 / len(table)) for i in range(len(table))))
        deal, moves = table[int(history[0])], history[1:]
        if len(moves) < players:
            seat = len(moves)
            return cfr.Decision(seat, latent_infoset(seat, private_info(deal, seat), moves), intents)
        if len(moves) < 2 * players:
            seat = len(moves) - players
            return cfr.Decision(seat, latent_infoset(seat, private_info(deal, seat), moves[:players], vote=True),
                                tuple(f"P{j}" for j in range(players) if j != seat))
        votes = [int(v[1:]) for v in moves[players:]]
        return cfr.Terminal(tuple(payoffs(deal, wolf_out(votes, players), players)))

    return cfr.build(node, players)


class LatentSolution(NamedTuple):
    policy: dict        # {set name: {action label: probability}}: LSPO's latent policy
    nash_conv: float    # sum over seats of what a best response gains against it (0 at a Nash equilibrium)
    village_win: float  # the village's probability of winning under it


def solve_latent(players: int, k: int, moves=(), *, iterations: int = 200, plus: bool = True,
                 prior: float = 1.0) -> LatentSolution:
    """LSPO's latent policy: the average strategy of `iterations` of CFR+ (plus=False: vanilla CFR) on
    `latent_game(players, k)`, started at the behaviour policy estimated from `moves` (observed (set, action) pairs,
    `WerewolfEnv.latent_moves`; add-`prior` smoothing; no moves: uniform), with its NashConv and the village's chance."""
    tree = latent_game(players, k)
    average = cfr.cfr(tree, iterations, plus=plus, init=cfr.empirical(tree, moves, prior=prior)).average
    u = cfr.expected_values(tree, average)
    # the seats' payoffs sum to (n - 1) - 1 = n - 2 when the village wins and to -(n - 2) when the wolf does
    return LatentSolution(cfr.as_dict(tree, average), cfr.nash_conv(tree, average),
                          float((u.sum() / (players - 2) + 1) / 2))
