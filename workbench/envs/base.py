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
import inspect
import json
import types
import typing
from pathlib import Path

from workbench.params import did_you_mean

Message = dict  # {"role": "user" | "assistant" | "tool" | "system", "content": str}


def user(content: str) -> Message:
    return {"role": "user", "content": content}


def system(content: str) -> Message:
    return {"role": "system", "content": content}


def as_messages(prompt: str | list[Message]) -> list[Message]:
    """A prompt as chat messages: a string is one user message."""
    return [user(prompt)] if isinstance(prompt, str) else list(prompt)


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


class OpeningEnv(Env):
    """Any environment with its opening messages edited by `edit(messages, example)` (a system prompt, a hint);
    otherwise the same env: its steps, stop strings, turns and state."""

    def __init__(self, env: Env, edit):
        self.env, self.edit = env, edit
        self.stop, self.max_turns = env.stop, env.max_turns
        self.copyable, self.subgoals = env.copyable, env.subgoals

    def reset(self, example, seed: int | None = None) -> tuple[list[Message], dict]:
        messages, info = self.env.reset(example, seed)
        return self.edit(messages, example), info

    def step(self, action: str):
        return self.env.step(action)

    def copy(self) -> OpeningEnv:
        return OpeningEnv(self.env.copy(), self.edit)

    def __getattr__(self, name):  # what an environment offers beyond the protocol (actions, subgoal names, ...)
        if name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)


class Knob(typing.NamedTuple):
    """A task knob as its constructor declares it: the types its value may take (None: unchecked) and its default."""

    types: tuple | None
    default: typing.Any = None


def knob_kinds(fn) -> dict[str, Knob]:
    """Each knob of a task constructor (a parameter with a default) -> its `Knob`, the types read off the
    annotations. The signature is the one list of a task's knobs, so the check of names and types cannot drift
    from what the constructor takes."""
    hints = type_hints(fn.__init__ if isinstance(fn, type) else fn) or type_hints(fn)
    return {name: Knob(value_types(hints.get(name)), p.default) for name, p in inspect.signature(fn).parameters.items()
            if p.default is not p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def type_hints(obj) -> dict:
    """`typing.get_type_hints(obj)`, or {} where its annotations do not resolve (a third party's class)."""
    try:
        return typing.get_type_hints(obj)
    except Exception:  # an annotation naming something its module does not define at run time
        return {}


def value_types(annotation) -> tuple | None:
    """The types a knob annotated `annotation` may take: int, float (an int too), bool, str, a path (a str too),
    None, or a union of these; None for anything else (left unchecked)."""
    if annotation is None:
        return None
    parts = typing.get_args(annotation) if typing.get_origin(annotation) in (typing.Union, types.UnionType) \
        else (annotation,)
    known = {int: (int,), float: (int, float), bool: (bool,), str: (str,), Path: (str, Path), type(None): (type(None),)}
    if not all(part in known for part in parts):
        return None
    return tuple(dict.fromkeys(t for part in parts for t in known[part]))


def fits(value, allowed: tuple) -> bool:
    """`value` is one of the `allowed` types; a bool is not an int or a float here."""
    if isinstance(value, bool):
        return bool in allowed
    return isinstance(value, allowed)


def check_knob_names(task: str, given, knobs) -> None:
    """Refuse a knob the task does not have ("sizee", "foo"), with the near misses and every knob it has."""
    knobs = list(knobs)
    unknown = [name for name in given if name not in knobs]
    if not unknown:
        return
    hints = [f"{name!r}{did_you_mean(name, knobs, n=2)}" for name in unknown]
    have = ", ".join(knobs) if knobs else "none"
    raise ValueError(f"{task}: unknown task_kw key{'s' if len(unknown) > 1 else ''} {', '.join(hints)}; "
                     f"{task}'s knobs: {have}")


def check_knob_types(task: str, knobs: dict, kinds: dict) -> None:
    """Refuse a task knob of the wrong type before anything runs ("no" for a bool, "6" for an int): `kinds` maps
    each knob to a `Knob` (as `knob_kinds` gives), a type or a tuple of types (None: unchecked); a bool is not an
    int here, an int is a float. `knobs` may hold more names (a constructor's `locals()`)."""
    bad = []
    for name, kind in kinds.items():
        knob = kind if isinstance(kind, Knob) else Knob((kind,) if isinstance(kind, type) else kind)
        if knob.types is None or name not in knobs:
            continue
        allowed = knob.types + (int,) if float in knob.types and int not in knob.types else knob.types
        if not fits(knobs[name], allowed):
            bad.append((name, knobs[name], allowed, knob.default))
    if bad:
        shown = ", ".join(f"{name}={value!r} ({type(value).__name__}; need {' or '.join(map(kind_name, allowed))})"
                          for name, value, allowed, _ in bad)
        name, _, allowed, default = bad[0]
        raise ValueError(f"{task}: wrong type for {shown}; e.g. --set task_kw.{name}={example_value(allowed, default)} "
                         "(a value that parses as JSON is read as JSON, anything else as text)")


def kind_name(kind: type) -> str:
    return {type(None): "null", bool: "bool: true or false", Path: "a path", str: "text"}.get(kind, kind.__name__)


def example_value(allowed: tuple, default=None) -> str:
    """How to write a value of an allowed type for `--set`: the knob's default when it has one, else a stand-in."""
    if default is not None and fits(default, allowed):
        return default if isinstance(default, str) else json.dumps(default)
    return {bool: "false", int: "3", float: "0.5", str: "text", Path: "data/file.jsonl"}.get(allowed[0], "null")


def check_knobs(task: str, given: dict, fn, extra: dict | None = None) -> None:
    """The one check of a task's `task_kw` before it is built: every name is a knob of `fn` (its constructor; `extra`
    adds the knobs it passes on, name -> `Knob`), every value of an allowed type. Ranges and feasibility are the
    task's own, checked by its constructor."""
    kinds = {**knob_kinds(fn), **(extra or {})}
    check_knob_names(task, given, kinds)
    check_knob_types(task, given, kinds)


def check_knob_rules(task: str, rules) -> None:
    """Refuse every broken rule at once: `rules` pairs "broken" with what is needed, naming the knobs and values."""
    problems = [text for broken, text in rules if broken]
    if problems:
        raise ValueError(f"{task}: need " + "; ".join(problems))


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
