"""Reward functions across the TRL boundary, both ways.

Theirs in our recipes: a reward key of the form "module:function" imports it (TRL's and open-r1's rewards,
or your own), e.g.

    use("trl.rewards:think_format_reward", weight=0.5)
    use("trl.rewards:get_cosine_scaled_reward", build={"max_len": 16})   # a factory: called once with `build`

TRL's built-in rewards read conversational completions (`completion[0]["content"]`), so they get
`[{"role": "assistant", "content": text}]` per row (`conversational=False` passes plain strings).

Ours in TRL: `as_trl("cosine-length", max_len=16)` is a picklable callable with a `__name__`, to put in
`GRPOTrainer(reward_funcs=[...])`; TRL's `trainer_state` becomes our `step` / `total_steps`.
"""
from __future__ import annotations

import importlib
import inspect

from workbench import registry
from workbench.params import did_you_mean
from workbench.rewards import base

CALL_OPTIONS = ("build", "conversational")  # a Use's keywords that configure the adapter, not the function


def is_external(key: str) -> bool:
    return ":" in key


def external_entry(key: str, kw: dict) -> registry.Entry:
    """A registry entry for "module:function" (built once with `kw["build"]` when given). A module that is missing,
    fails to import (a syntax error, an exception at import) or a factory that refuses `build` is refused in words,
    before anything trains."""
    module_name, _, attr = key.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        raise ValueError(f"reward {key!r}: no module {err.name!r} ({err}); an external reward is 'module:function' "
                         "importable from here, e.g. 'trl.rewards:think_format_reward'") from None
    except Exception as err:  # the user's module raised while importing: say where, not a traceback of ours
        raise ValueError(f"reward {key!r}: importing {module_name!r} failed: {type(err).__name__}: {err}") from err
    if not hasattr(module, attr):
        known = [n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n))]
        raise ValueError(f"reward {key!r}: cannot import {attr!r} from {module_name!r}{did_you_mean(attr, known)}; "
                         "an external reward is 'module:function', e.g. 'trl.rewards:think_format_reward'")
    fn = getattr(module, attr)
    if "build" in kw:
        fn = built(key, fn, kw["build"])
    if not callable(fn):
        raise ValueError(f"reward {key!r} is not callable; a factory needs build={{...}} to make the reward function")
    name = getattr(fn, "__name__", attr)
    wrapped = Conversational(fn, name) if kw.get("conversational", True) else fn
    return registry.Entry(key=key, kind="reward", fn=wrapped, title=f"external reward {name}",
                          summary=f"{module_name}.{attr}, called with TRL's signature", family="external")


def built(key: str, factory, build):
    """factory(**build), the reward a factory makes; its refusal of `build` in words, with what it takes."""
    if not isinstance(build, dict):
        raise ValueError(f"reward {key!r}: build={build!r} must be a mapping of the factory's keywords, e.g. "
                         "build={'max_len': 16}")
    if not callable(factory):
        raise ValueError(f"reward {key!r} is not a factory: build={build!r} cannot be applied to it")
    try:
        return factory(**build)
    except Exception as err:  # the user's factory refused its arguments
        try:
            takes = f"; it takes {list(inspect.signature(factory).parameters)}"
        except (TypeError, ValueError):  # a builtin without a signature
            takes = ""
        raise ValueError(f"reward {key!r}: build={build!r} failed: {type(err).__name__}: {err}{takes}") from err


class Conversational:
    """Calls a TRL-convention reward with chat-message completions and prompts, as TRL's conversational path does."""

    def __init__(self, fn, name: str):
        self.fn, self.__name__ = fn, name

    def __call__(self, completions, prompts=None, **columns):
        completions = [[{"role": "assistant", "content": c}] if isinstance(c, str) else c for c in completions]
        if prompts is not None:
            prompts = [[{"role": "user", "content": p}] if isinstance(p, str) else p for p in prompts]
        return self.fn(completions=completions, prompts=prompts, **columns)


class TRLReward:
    """One of our rewards as a TRL `reward_funcs` entry (picklable: TRL's async workers pickle rewards)."""

    def __init__(self, key: str, **hp):
        self.entry = registry.get("reward", key)
        self.key, self.hp, self.__name__ = key, hp, key

    def __call__(self, completions, trainer_state=None, **columns):
        if trainer_state is not None and "step" not in columns:
            step, total = base.training_step({"trainer_state": trainer_state})
            columns.update(step=step, total_steps=total)
        return self.entry.fn(completions, **columns, **self.hp)


def as_trl(key: str, **hp) -> TRLReward:
    """Our registered reward `key` with hyper-parameters `hp`, ready for `GRPOTrainer(reward_funcs=[...])`."""
    return TRLReward(key, **hp)
