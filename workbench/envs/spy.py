"""Who is the spy, in text: Vision-Zero's "spot the difference" game without images.

Vision-Zero's setting without images. The authors' players each see a CLEVR picture, the spy's with two objects
replaced; here each player sees a scene written as text, `objects` (4) objects such as "red cube", the spy's with one
object replaced by another (in the same position). N = `players` (4) players give clues for `rounds` (2) rounds,
in the fixed order P1..PN (the authors' order); then K = `judges` (8) judges, the authors' "God" decisions (one
outside observer sampled K times), each see the civilians' scene and every clue and vote for the spy, independently
(no judge sees another's vote). With judges = 0 the players vote themselves instead (the authors' group path).

Agents: P1..PN (ids 0..N-1), then J1..JK (ids N..N+K-1). Each knows its role: a player's view says "spy" or "civ"
(the authors tell the spy it is the spy). Format, e.g. N = 4, spy P2, one round shown:

    P1  prompt  "P1 civ:red cube,blue ball,green cone,gray ring\\n1:"    action "blue ball."
    P2  prompt  "P2 spy:red cube,pink ball,green cone,gray ring\\n1:blue ball.\\n2:"
                action "pink ball."                    (a truthful clue the others can check: the spy is exposed)
    J1  prompt  "J:red cube,blue ball,green cone,gray ring\\n1:blue ball.\\n2:pink ball.\\n3:...\\nvote:"
                action "V2."                           ("V?" abstains: the authors' N/A)

A clue is one object of the speaker's own scene, written as the scene writes it, ending with "." (the stop string;
EOS also ends a turn): clues are true, so only the spy can say an object the civilians do not see. Each agent sees
every other player's clue as "\\n{k}:{clue}." and is cued before its own turn ("\\n{k}:" for a clue, "\\nvote:" for a
vote). A vote is "V{k}" for player k (1..9) or "V?".

Illegal actions never crash a game. A clue that is not an object of the speaker's scene (or does not parse) is shown
to the others as "?", the speaker is told why ("\\nillegal: ...") and gets ILLEGAL_CLUE = -1 at once (ours: the
authors take any sentence as a clue). A vote that does not parse, or names no player, is told so and counts for
nobody; its reward is the reward module's for a wrong or unformatted vote (a judge: -1.5).

Rewards (`workbench.rewards.vision_zero`, all at the last vote besides the clue penalties): with judges, each
player gets its clue reward from the judges' votes (`strategic_clue_rewards`, zero-sum) and each judge its decision
reward (`decision_reward`: the RLVR reward against the true spy); without judges, each player gets
`game_rewards` of all players' votes (alpha 0.6, beta 0.5, clipped to [-1, 1]; not zero-sum). The role baselines
and the per-game normalization of the judges' rewards are the trainer's (reward shaping `vision-zero`).

info (reset and every step): "phase" ("clue" / "vote": the phase of the action the step took; reset: the first
action's), "mover" (the agent that acted), "clue" (the clue text when legal, else None), "vote" (a player number,
"N/A" or None on vote steps), "tool_error", "round" (1-based, clue steps), "spy" (the spy's player number), "roles"
(each agent's role: civilian, spy, judge), "state" (the next mover and the clues shown so far; None at the end).

Decisions. The example fixes the scenes and the spy (the rows of one prompt group play the same situation); the
episode seed changes nothing in the game (Python players draw from their own seeded stream). One object differs, not
two. Clues may repeat earlier clues (the authors only ask for a different clue in the prompt), so a spy that speaks
after a civilian can blend in by repeating a clue it also sees (unless every earlier clue names the object it lacks);
a spy that speaks first, or picks its odd object, is exposed. In the players-vote mode a spy's unparsable vote costs
it nothing (`calculate_game_rewards` only penalizes a spy's vote for itself). With the defaults a row is under 200
characters (the tiny model's context is 256).

Python players: "random" (a random object of its scene; a random vote among V1..VN and V?), "scripted" (a civilian
names a random object of its scene; the spy repeats a clue another player gave that is also in its scene, else a
random object; a judge or civilian votes the first player whose clue is not in its own scene, else a random other
player: guessing beats abstaining under the decision reward; the spy votes a random other player).
"""
from __future__ import annotations

import random
import re

from workbench import registry
from workbench.envs.base import check_knob_rules, check_knob_types, knob_kinds, tool, user
from workbench.envs.multiagent import GameTask, MultiAgentEnv, seat_rng
from workbench.rewards.vision_zero import (ABSTAIN, counted, decision_reward, game_rewards,
                                           strategic_clue_rewards)
from workbench.tasks.base import Example

COLORS = ("red", "blue", "green", "pink", "gray")
SHAPES = ("cube", "ball", "cone", "ring")
OBJECTS = tuple(f"{color} {shape}" for color in COLORS for shape in SHAPES)
STOP = "."
ILLEGAL_CLUE = -1.0  # a player's reward for a clue that is not an object of its scene
VOTE_CUE = "\nvote:"
VOTE = re.compile(r"V([1-9?])")


# ----------------------------------------------------------------------------- text

def scene_text(scene) -> str:
    return ",".join(scene)


def parse_answer(answer: str) -> tuple[int, tuple[str, ...], tuple[str, ...]]:
    """(spy's player number, civilians' scene, spy's scene) from an example's answer "spy|scene|spy scene"."""
    spy, civilian, odd = answer.split("|")
    return int(spy), tuple(civilian.split(",")), tuple(odd.split(","))


def action_text(action: str) -> str:
    """An action without surrounding spaces and its closing stop string."""
    text = action.strip()
    return text[:-1].strip() if text.endswith(STOP) else text


def parse_vote(action: str):
    """A player number, ABSTAIN ("V?"), or None (not a vote)."""
    match = VOTE.fullmatch(action_text(action))
    if match is None:
        return None
    return ABSTAIN if match.group(1) == "?" else int(match.group(1))


def vote_action(vote) -> str:
    return f"V{'?' if vote == ABSTAIN else vote}{STOP}"


def voted(transcript: str):
    """The vote a transcript's last vote turn cast (what follows its last vote cue, up to the next line)."""
    return parse_vote(transcript.rsplit(VOTE_CUE, 1)[-1].split("\n")[0]) if VOTE_CUE in transcript else None


def roles_of(spy: int, players: int, judges: int) -> tuple[str, ...]:
    return tuple("spy" if k == spy else "civilian" for k in range(1, players + 1)) + ("judge",) * judges


# ----------------------------------------------------------------------------- the game

class SpyEnv(MultiAgentEnv):
    """One game of a SpyTask example (see the module docstring)."""

    stop = (STOP,)
    phases = ("clue", "vote")  # info["phase"] of every step: the phase mask and the rewards read them

    def __init__(self, task: SpyTask):
        self.task, self.n, self.k, self.rounds = task, task.players, task.judges, task.rounds
        self.agents = tuple(f"P{i}" for i in range(1, self.n + 1)) + tuple(f"J{j}" for j in range(1, self.k + 1))
        self.voters = list(range(self.n, self.n + self.k)) if self.k else list(range(self.n))
        self.max_turns = self.rounds + (0 if self.k else 1)
        self.spy, self.civilian, self.scenes, self.order, self.t = None, (), [], [], 0
        self.clues: list[tuple[int, str | None]] = []  # (player number, its clue or None when illegal)
        self.votes: dict[int, object] = {}             # voter's agent id -> its vote

    players = {}  # filled below the Python players' definitions

    @property
    def roles(self) -> tuple[str, ...]:
        return roles_of(self.spy, self.n, self.k)

    def reset(self, example: Example, seed: int | None = None):
        self.spy, self.civilian, odd = parse_answer(example.answer)
        if not counted(self.spy, self.n) or len(self.civilian) != self.task.objects:
            raise ValueError(f"example {example.answer!r} is not a game of {self.n} players and {self.task.objects} "
                             "objects (draw it from the same SpyTask)")
        self.scenes = [odd if k == self.spy else self.civilian for k in range(1, self.n + 1)]
        self.order = [(k, "clue") for _ in range(self.rounds) for k in range(self.n)] + \
                     [(a, "vote") for a in self.voters]
        self.t, self.clues, self.votes = 0, [], {}
        views = [[user(self.view(a))] for a in range(len(self.agents))]
        views[self.order[0][0]].append(tool(self.cue()))
        return views, self.info("clue", None, None, None, None)

    def view(self, agent: int) -> str:
        if agent >= self.n:
            return f"J:{scene_text(self.civilian)}"
        role = "spy" if agent + 1 == self.spy else "civ"
        return f"P{agent + 1} {role}:{scene_text(self.scenes[agent])}"

    def cue(self) -> str:
        """What the next mover is shown just before its turn."""
        agent, phase = self.order[self.t]
        return f"\n{agent + 1}:" if phase == "clue" else VOTE_CUE

    def to_move(self) -> int | None:
        return None if self.spy is None or self.t >= len(self.order) else self.order[self.t][0]

    def state(self):
        if self.t >= len(self.order):
            return None
        return self.order[self.t][0], tuple(c or "?" for _, c in self.clues)

    def info(self, phase, mover, clue, vote, error) -> dict:
        return {"state": self.state(), "phase": phase, "mover": mover, "clue": clue, "vote": vote,
                "tool_error": error, "round": self.t // self.n + 1 if phase == "clue" else None,
                "spy": self.spy, "roles": self.roles}

    def step(self, action: str):
        if self.spy is None:
            raise RuntimeError("step before reset")
        n_agents = len(self.agents)
        observations, rewards = [[] for _ in range(n_agents)], [0.0] * n_agents
        if self.t >= len(self.order):
            return observations, rewards, True, {**self.info(None, None, None, None, "the game is over"),
                                                 "state": None}
        agent, phase = self.order[self.t]
        clue = vote = error = None
        if phase == "clue":
            said = action_text(action)
            if said in self.scenes[agent]:
                clue = said
            else:
                error = f"{said[:20]!r} is not in your scene"
                rewards[agent] += ILLEGAL_CLUE
            self.clues.append((agent + 1, clue))
            for j in range(n_agents):
                if j != agent:
                    observations[j].append(tool(f"\n{agent + 1}:{clue or '?'}{STOP}"))
        else:
            vote = self.votes[agent] = parse_vote(action)
            if vote is None or not (vote == ABSTAIN or counted(vote, self.n)):
                error = f"vote V1..V{self.n} or V?"
        if error:
            observations[agent].append(tool(f"\nillegal: {error}"))
        info = self.info(phase, agent, clue, vote, error)
        self.t += 1
        done = self.t == len(self.order)
        if done:
            for a, r in enumerate(self.final_rewards()):
                rewards[a] += r
        else:
            observations[self.order[self.t][0]].append(tool(self.cue()))
        return observations, rewards, done, {**info, "state": self.state()}

    def final_rewards(self) -> list[float]:
        """Every agent's game reward once the last vote is in (`workbench.rewards.vision_zero`)."""
        if not self.k:
            return game_rewards([self.votes[a] for a in range(self.n)], self.spy)
        votes = [self.votes[a] for a in self.voters]
        clue = strategic_clue_rewards(votes, self.spy, self.n)
        return clue + [decision_reward(v, self.spy, self.n) for v in votes]


# ----------------------------------------------------------------------------- Python players

def random_player(env: SpyEnv, rng: random.Random) -> str:
    agent, phase = env.order[env.t]
    if phase == "clue":
        return rng.choice(env.scenes[agent]) + STOP
    return vote_action(rng.choice([*range(1, env.n + 1), ABSTAIN]))


def scripted_player(env: SpyEnv, rng: random.Random) -> str:
    agent, phase = env.order[env.t]
    me = agent + 1 if agent < env.n else None  # a judge is no player
    if phase == "clue":
        scene = env.scenes[agent]
        blend = sorted({c for k, c in env.clues if c is not None and k != me and c in scene}) if me == env.spy else []
        return rng.choice(blend or list(scene)) + STOP
    others = [k for k in range(1, env.n + 1) if k != me]
    if me == env.spy:
        return vote_action(rng.choice(others))
    seen = env.civilian if me is None else env.scenes[agent]
    suspects = sorted({k for k, c in env.clues if c is not None and c not in seen and k != me})
    return vote_action(suspects[0] if suspects else rng.choice(others))


SpyEnv.players = {"random": random_player, "scripted": scripted_player}


# ----------------------------------------------------------------------------- the task

@registry.env(
    "spy", title="Who is the spy, in text (Vision-Zero's game without images)", family="multiagent",
    summary="N players see a scene of objects as text (the spy's differs in one object) and give truthful clues in "
            "turn; K judges who see the civilians' scene vote for the spy (or the players vote). Game rewards are "
            "Vision-Zero's; each turn's info names its phase (clue / vote).")
class SpyTask(GameTask):
    """Each example is a deal: the civilians' scene, the spy's scene and which player is the spy.

    Knobs (`task_kw`): players (N, 4; 3..9), objects per scene (4; 2..8), rounds of clues (2; 1..3), judges (K, 8,
    the authors' 8 God decisions per game; 0: the players vote), expert (the Python player whose games warm-start the
    policy: "random", as kuhn's and tictactoe's, or "scripted"), eval_examples (16 deals). Evaluation (`evaluate`):
    accuracy = the share of the policy's votes naming the spy (as a judge; as a civilian when the players vote)
    against random players, each role's mean return against scripted players, the share of games with an illegal
    action.
    """

    name = "spy"

    def __init__(self, *, players: int = 4, objects: int = 4, rounds: int = 2, judges: int = 8,
                 expert: str = "random", eval_examples: int = 16):
        check_knob_types("spy", locals(), knob_kinds(SpyTask))
        check_knob_rules("spy", [
            (not 3 <= players <= 9, f"3 <= players <= 9 (votes name one digit), got {players}"),
            (not 2 <= objects <= 8, f"2 <= objects <= 8 (the spy's object must be new), got {objects}"),
            (not 1 <= rounds <= 3, f"1 <= rounds <= 3, got {rounds}"),
            (not 0 <= judges <= 16, f"0 <= judges <= 16 (0: the players vote), got {judges}"),
            (expert not in SpyEnv.players, f"expert one of {sorted(SpyEnv.players)}, got {expert!r}"),
            (eval_examples < 1, f"eval_examples >= 1, got {eval_examples}"),
        ])
        self.players, self.objects, self.rounds, self.judges = players, objects, rounds, judges
        self.expert, self.eval_examples = expert, eval_examples

    def make_example(self, rng: random.Random) -> Example:
        civilian = rng.sample(OBJECTS, self.objects)
        spy, where = rng.randint(1, self.players), rng.randrange(self.objects)
        odd = list(civilian)
        odd[where] = rng.choice([o for o in OBJECTS if o not in civilian])
        prompt = f"P1 {'spy' if spy == 1 else 'civ'}:{scene_text(odd if spy == 1 else civilian)}"
        return Example(prompt=prompt, answer=f"{spy}|{scene_text(civilian)}|{scene_text(odd)}", target="")

    def make_env(self) -> SpyEnv:
        return SpyEnv(self)

    def expert_game(self, example: Example, seed: int) -> list[tuple[int, str]]:
        """[(agent id, action text)] of the game the expert Python player plays in every seat, in turn order: the
        game the SFT warm start encodes (`rollout.agents.expert_rows`, the same seeded stream)."""
        env, rng, out = self.make_env(), seat_rng(seed, "players"), []
        env.reset(example, seed)
        while (agent := env.to_move()) is not None:
            action = env.play(self.expert, rng)
            out.append((agent, action))
            env.step(action)
        return out

    def evaluate(self, policy) -> tuple[float, list[dict], dict]:
        """Every eval deal played once with the policy in each seat, against random players (the policy's votes: a
        random spy often gives its odd object away, so a judge that checks the clues can find it) and against
        scripted ones (the roles' returns: scripted judges find an exposed spy every time)."""
        records = []
        for example in self.eval_set(self.eval_examples):
            spy = parse_answer(example.answer)[0]
            roles = roles_of(spy, self.players, self.judges)
            for opponent in ("random", "scripted"):
                for game in policy.play(self, example, opponent=opponent, games=len(roles)):
                    records.append({"opponent": opponent, "role": roles[game["seat"]], "spy": spy, **game})
        voter = "judge" if self.judges else "civilian"
        votes = [r for r in records if r["opponent"] == "random" and r["role"] == voter]
        accuracy = sum(voted(r["transcript"]) == r["spy"] for r in votes) / len(votes)
        scripted = [r for r in records if r["opponent"] == "scripted"]
        metrics = {f"{role}_return": sum(r["return"] for r in scripted if r["role"] == role) /
                   sum(r["role"] == role for r in scripted) for role in set(roles_of(1, self.players, self.judges))}
        metrics["illegal"] = sum(r["illegal"] for r in records) / len(records)
        return accuracy, records, metrics
