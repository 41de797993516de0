"""The multi-agent environment protocol: N agents take turns in one episode, each with its own view.

    views, info = env.reset(example, seed)        # views[k]: agent k's opening chat messages
    k = env.to_move()                             # the agent whose turn it is (None once the episode is over)
    observations, rewards, done, info = env.step(action)   # agent k's action text
        observations[j]: messages agent j now sees (the other agents' actions, as the game shows them; j's own
                         result, e.g. "illegal move"); [] for nothing new
        rewards[j]:      agent j's reward from this step (zero-sum games: sum_j rewards[j] = 0 at the end)

The rollout (`workbench.rollout.agents`) makes one batch row per (episode, agent played by the policy): the agent's
opening view is the row's prompt; its actions are the row's trained tokens (mask 1); everything it observes between
its actions (the others' actions, the game's messages) is appended as tokens with mask 0. The batch's `agent [B]`
says whose row it is (index into `agents`), `episode [B]` which rows played together.

Bad input never crashes an episode: an action the game does not allow gets an observation saying so and a penalty
(each game states its rule; the two-player games here forfeit: the mover loses what a fold or a loss costs).

Opponents that are not a language model are Python players: `env.players[name](env, rng) -> action text` for the
agent to move (e.g. "random", "scripted", "solver": a game's exact solution where it has one). The rollout seats
them by name; seats and who moves first are drawn from the episode's seed.
"""
from __future__ import annotations

import random
from typing import Callable

from workbench.envs.base import Env, Message
from workbench.tasks.base import EVAL_SEED, Example, Task

Player = Callable[["MultiAgentEnv", random.Random], str]  # a Python player: the action text for the agent to move


class MultiAgentEnv(Env):
    """A text environment of `len(agents)` agents taking turns (see the module docstring).

    Subclasses set `agents` (role names; agent id = index), `stop`, `max_turns` (the most actions one agent takes in
    an episode) and `players` (name -> `Player`), and implement `reset`, `to_move` and `step`.
    """

    agents: tuple[str, ...] = ()
    players: dict[str, Player] = {}

    def reset(self, example, seed: int | None = None) -> tuple[list[list[Message]], dict]:
        raise NotImplementedError

    def to_move(self) -> int | None:
        raise NotImplementedError

    def step(self, action: str) -> tuple[list[list[Message]], list[float], bool, dict]:
        raise NotImplementedError

    def play(self, name: str, rng: random.Random) -> str:
        """The action of Python player `name` for the agent to move."""
        if name not in self.players:
            raise ValueError(f"{type(self).__name__} has no player {name!r}; its players: {sorted(self.players)}")
        return self.players[name](self, rng)


def agent_id(env_or_agents, agent) -> int:
    """The id of `agent` (an int or a role name) among an environment's agents, or an error naming them."""
    agents = tuple(getattr(env_or_agents, "agents", env_or_agents))
    if isinstance(agent, bool) or not isinstance(agent, (int, str)):
        raise ValueError(f"an agent is an id 0..{len(agents) - 1} or a role name {list(agents)}, got {agent!r}")
    if isinstance(agent, str):
        if agent not in agents:
            raise ValueError(f"unknown agent {agent!r}: this game's agents are {list(agents)} (ids 0..{len(agents) - 1})")
        return agents.index(agent)
    if not 0 <= agent < len(agents):
        raise ValueError(f"unknown agent id {agent}: this game's agents are {list(agents)} (ids 0..{len(agents) - 1})")
    return agent


class GameTask(Task):
    """A game as a task: examples are starting positions (a deal, an opening), played by agents through
    `make_env()` (a `MultiAgentEnv`). Nothing is held out: a game is evaluated by playing it (`evaluate`), not on
    unseen prompts, so training draws from every example.

    Subclasses implement `make_example`, `make_env`, `evaluate(policy) -> (accuracy, records, metrics)` (`policy`: a
    `workbench.rollout.agents.GamePolicy`) and set `expert` (the Python player whose games warm-start the policy:
    SFT teaches the format and that player's strategy, which RL then improves).
    """

    expert: str = "random"
    accuracy_is: str = ""  # what the accuracy `evaluate` returns measures (e.g. "share of games not lost to minimax")

    def held_out_prompts(self) -> set[str]:
        return set()

    def eval_set(self, n: int | None = None) -> list[Example]:
        """Examples from a fixed seed (what the prompt checks read; evaluation plays games instead)."""
        rng = random.Random(EVAL_SEED)
        return [self.make_example(rng) for _ in range(n or 16)]

    def score(self, completion: str, example: Example) -> float:
        raise TypeError(f"{self.name} is a game: its environment rewards each agent; play it with the rollout "
                        "`agents` (a recipe for a single answer per prompt does not fit)")

    def evaluate(self, policy) -> tuple[float, list[dict], dict]:
        raise NotImplementedError


def seat_rng(seed: int, what: str) -> random.Random:
    """The episode's own random stream for `what` (seats, a Python player's choices), from its seed."""
    return random.Random(f"{seed}-{what}")
