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

import copy

Message = dict  # {"role": "user" | "assistant" | "tool" | "system", "content": str}


def user(content: str) -> Message:
    return {"role": "user", "content": content}


def tool(content: str) -> Message:
    return {"role": "tool", "content": content}


class Env:
    """A text environment: `reset` opens an episode, `step` takes one action turn's text.

    Subclasses set `stop` and `max_turns` and implement both methods; an env object runs one episode at a
    time (the rollout makes one per row with `task.make_env()`).
    """

    stop: tuple[str, ...] = ()
    max_turns: int = 1
    copyable: bool = True  # `copy()` gives an independent episode in the same state (False: an env wrapping outside state)
    subgoals: bool = False  # info["subgoal"] names the subgoal window each step is in (hierarchical credit)

    def reset(self, example, seed: int | None = None) -> tuple[list[Message], dict]:
        raise NotImplementedError

    def step(self, action: str) -> tuple[list[Message], float, bool, dict]:
        raise NotImplementedError

    def copy(self) -> "Env":
        """An independent environment in this one's state mid-episode (Monte Carlo continuations, branching
        rollouts): every attribute deep-copied except the task, which is shared and never changed by an episode."""
        if not self.copyable:
            raise TypeError(f"{type(self).__name__} cannot copy its state (it wraps state outside Python, e.g. a "
                            "TRL environment class); use a built-in environment for methods that branch from a state")
        twin = copy.copy(self)
        twin.__dict__ = {k: v if k == "task" else copy.deepcopy(v) for k, v in self.__dict__.items()}
        return twin


def check_knob_types(task: str, knobs: dict, kinds: dict) -> None:
    """Refuse a task knob of the wrong type before anything runs ("no" for a bool, "two" for an int): `kinds` maps
    each knob to int, float or bool (a bool is not an int here, an int is a float)."""
    ok = {int: lambda v: isinstance(v, int) and not isinstance(v, bool),
          float: lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
          bool: lambda v: isinstance(v, bool)}
    bad = [f"{k}={knobs[k]!r} (need {t.__name__})" for k, t in kinds.items() if not ok[t](knobs[k])]
    if bad:
        raise ValueError(f"{task}: wrong type for {', '.join(bad)}; e.g. --set task_kw.{bad[0].split('=')[0]}=...")


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
