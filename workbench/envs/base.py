"""The environment protocol (SkyRL-gym's `BaseTextEnv`, rLLM's `BaseEnv`, gymnasium) and the one-turn `TaskEnv`.

    messages, info = env.reset(example, seed)              # chat messages that open the episode
    observations, reward, done, info = env.step(action)    # action: the text of one policy turn

Messages are chat messages {"role": ..., "content": ...}; observations are `tool` messages. `info["state"]` is
a hashable key of the state the next action is taken from (GiGPO groups steps by it); `info["tool_error"]`
says why a step's tool call failed (None when it did not). Env-level attributes: `stop`, the strings that end
an action turn (e.g. a tool call's closing bracket; kept in the action's text; EOS always ends a turn too),
and `max_turns`, the most actions an episode takes. The multi-turn rollout (`workbench.rollout.turns`) drives
every task through this protocol: a one-turn task is the case max_turns = 1, not a second code path.
"""
from __future__ import annotations

import hashlib
from dataclasses import asdict, is_dataclass

Message = dict  # {"role": "user" | "assistant" | "tool" | "system", "content": str}


def user(content: str) -> Message:
    return {"role": "user", "content": content}


def tool(content: str) -> Message:
    return {"role": "tool", "content": content}


def episode_seed(example, index: int) -> int:
    """A seed fixed by the example and the row's sample index in its group (the same in every process, unlike
    `hash`): an environment with random dynamics replays identically, and a group's rows differ."""
    key = repr(sorted(asdict(example).items())) if is_dataclass(example) else repr(example)
    return int.from_bytes(hashlib.sha256(f"{key}\0{index}".encode()).digest()[:4], "little")


class Env:
    """A text environment: `reset` opens an episode, `step` takes one action turn's text.

    Subclasses set `stop` and `max_turns` and implement both methods; an env object runs one episode at a
    time (the rollout makes one per row with `task.make_env()`).
    """

    stop: tuple[str, ...] = ()
    max_turns: int = 1

    def reset(self, example, seed: int | None = None) -> tuple[list[Message], dict]:
        raise NotImplementedError

    def step(self, action: str) -> tuple[list[Message], float, bool, dict]:
        raise NotImplementedError


class TaskEnv(Env):
    """A task as a one-turn environment: the prompt is one user message, the one action is scored by
    `task.score` and ends the episode. The state is the prompt (all rows of a group share it)."""

    max_turns = 1

    def __init__(self, task):
        self.task = task
        self.example = None

    def reset(self, example, seed: int | None = None) -> tuple[list[Message], dict]:
        self.example = example
        return [user(example.prompt)], {"state": example.prompt}

    def step(self, action: str) -> tuple[list[Message], float, bool, dict]:
        if self.example is None:
            raise RuntimeError("step before reset")
        return [], float(self.task.score(action, self.example)), True, {"state": None}
