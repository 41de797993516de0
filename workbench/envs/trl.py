"""TRL's `environment_factory` classes as environments (TRL 1.16 `GRPOTrainer(environment_factory=...)`).

TRL's convention: a class with `reset(**row)` (the dataset row's columns as keywords) returning None or an
initial observation string, which TRL appends to the last user message; every other public method is a tool
the model may call (name, type hints and docstring are its schema); an optional `get_reward()` makes the
environment own the reward. A rollout ends when a completion calls no tool. Reward functions are called as
`fn(prompts=..., completions=..., environments=[...], **columns)` and return one float (or None) per row;
every source is summed with weight 1.

Our tool-call syntax, one call per action turn (the closing tag is the env's stop string), is TRL's
(`workbench.text.tool_calls`: Hermes / Qwen JSON or a Python call of literals):

    <tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>

The result comes back as a `tool` message (`str(result)`, formatted by `response_format`); a failing call
(unknown tool, bad arguments, an exception inside the tool) returns `{'error': ...}` as TRL does and sets
info["tool_error"]. An action without a tool call is the final answer: the episode ends and is scored
(`completions` = that action's text). After `max_turns` actions the episode is scored as it stands.
"""
from __future__ import annotations

import inspect
import random
from dataclasses import asdict, is_dataclass
from typing import Callable

from workbench.envs.base import Env, user
from workbench.tasks.base import Example, Task
from workbench.text.tool_calls import CLOSE, parse_tool_call


def tool_methods(instance) -> dict[str, Callable]:
    """TRL's rule: public functions of the class other than reset and get_reward, bound to the instance."""
    return {name: getattr(instance, name) for name, _ in inspect.getmembers(type(instance), inspect.isfunction)
            if name not in ("reset", "get_reward") and not name.startswith("_")}


def row_of(example) -> dict:
    """The dataset row reset(**row) and the reward functions see."""
    return dict(example) if isinstance(example, dict) else asdict(example) if is_dataclass(example) else \
        {"prompt": example}


class TRLEnv(Env):
    """A TRL environment instance (`factory()`, made once per TRLEnv, reset every episode) behind our protocol.

    reward_funcs: TRL-style reward functions (see the module docstring). response_format: how a tool result
    becomes the tool message's content ("{}" = as is; a plain-text model may want e.g.
    "<tool_response>{}</tool_response>\\n"). columns: example -> the row passed to reset and reward functions
    (default: the example's fields).
    """

    copyable = False  # the wrapped instance holds the user's state; we cannot promise a faithful copy

    stop = (CLOSE,)

    def __init__(self, factory: Callable, *, reward_funcs=(), max_turns: int = 8, response_format: str = "{}",
                 columns: Callable | None = None):
        self.instance = factory()
        if not callable(getattr(self.instance, "reset", None)):
            raise ValueError("a TRL environment must define a callable `reset`")
        self.tools = tool_methods(self.instance)
        self.reward_funcs = list(reward_funcs)
        if not self.reward_funcs and not callable(getattr(self.instance, "get_reward", None)):
            raise ValueError("no reward source: pass reward_funcs or give the environment a get_reward method")
        self.max_turns, self.response_format = max_turns, response_format
        self.columns = columns or row_of
        self.row, self.prompt, self.calls, self.turns = None, None, (), 0

    def reset(self, example, seed: int | None = None):
        self.row, self.calls, self.turns = self.columns(example), (), 0
        prompt = self.row["prompt"]
        messages = [user(prompt)] if isinstance(prompt, str) else [dict(m) for m in prompt]
        observation = self.instance.reset(**self.row)
        if observation is not None:  # TRL appends it to the last user message
            messages[-1] = {**messages[-1], "content": messages[-1]["content"] + str(observation)}
        self.prompt = prompt
        return messages, {"state": self.calls}

    def step(self, action: str):
        if self.row is None:
            raise RuntimeError("step before reset")
        self.turns += 1
        try:
            call = parse_tool_call(action)
        except ValueError as err:
            call, error, name, result = None, str(err), "unknown", {"error": str(err)}
        else:
            error = None
        if call is None and error is None:  # no tool call: the final answer
            return [], self.reward(action), True, {"state": None}
        if call is not None:
            name, args, kwargs = call
            result, error = self.run_tool(name, args, kwargs)
            self.calls += (f"{name}{tuple(args)}{sorted(kwargs.items())}",)
        message = {"role": "tool", "name": name, "content": self.response_format.format(result)}
        done = self.turns >= self.max_turns
        reward = self.reward(action) if done else 0.0
        return [message], reward, done, {"state": self.calls, "tool_error": error}

    def run_tool(self, name: str, args: list, kwargs: dict):
        """(result, error message or None); a failure is returned to the model as TRL does."""
        if name not in self.tools:
            return {"error": f"Tool {name} not found."}, f"unknown tool {name!r}"
        try:
            return self.tools[name](*args, **kwargs), None
        except Exception as err:  # the tool's own failure is an observation, not a crash
            return {"error": str(err)}, f"{type(err).__name__}: {err}"

    def reward(self, completion: str) -> float:
        """Sum of every reward source for this episode (None from a function means "not applicable": 0)."""
        total = 0.0
        if callable(getattr(self.instance, "get_reward", None)):
            total += float(self.instance.get_reward())
        columns = {k: [v] for k, v in self.row.items() if k not in ("prompt", "completions", "environments")}
        for fn in self.reward_funcs:
            value = fn(prompts=[self.prompt], completions=[completion], environments=[self.instance], **columns)[0]
            total += 0.0 if value is None else float(value)
        return total


class TRLTask(Task):
    """Dataset rows (dicts with a "prompt" and whatever columns reset / the reward functions read) run through a
    TRL environment class. Training samples `rows`; the held-out set is `eval_rows` (default none)."""

    name = "trl"

    def __init__(self, factory: Callable, rows: list[dict], *, reward_funcs=(), max_turns: int = 8,
                 response_format: str = "{}", eval_rows: list[dict] | None = None):
        if not rows:
            raise ValueError("TRLTask needs at least one row")
        self.factory, self.reward_funcs = factory, list(reward_funcs)
        self.max_turns, self.response_format = max_turns, response_format
        self.rows = {str(r["prompt"]): dict(r) for r in [*rows, *(eval_rows or [])]}
        self.train_prompts = [str(r["prompt"]) for r in rows]
        self.eval_prompts = [str(r["prompt"]) for r in eval_rows or []]

    def example(self, prompt: str) -> Example:
        row = self.rows[prompt]
        return Example(prompt=prompt, answer=str(row.get("answer", "")), target=str(row.get("target", "")))

    def make_example(self, rng: random.Random) -> Example:
        return self.example(rng.choice(self.train_prompts))

    def eval_set(self, n: int | None = None) -> list[Example]:
        rows = [self.example(p) for p in self.eval_prompts]
        return rows[:n] if n else rows

    def score(self, completion: str, example: Example) -> float:
        """A one-turn score: the final answer's reward in a fresh episode (tools never called)."""
        env = self.make_env()
        env.reset(example)
        return env.reward(completion)

    def make_env(self) -> TRLEnv:
        return TRLEnv(self.factory, reward_funcs=self.reward_funcs, max_turns=self.max_turns,
                      response_format=self.response_format, columns=lambda e: self.rows[e.prompt])
