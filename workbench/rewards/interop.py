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

from workbench import registry
from workbench.rewards import base

CALL_OPTIONS = ("build", "conversational")  # a Use's keywords that configure the adapter, not the function


def is_external(key: str) -> bool:
    return ":" in key


def external_entry(key: str, kw: dict) -> registry.Entry:
    """A registry entry for "module:function" (built once with `kw["build"]` when given)."""
    module_name, _, attr = key.partition(":")
    try:
        fn = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"reward {key!r}: cannot import {attr!r} from {module_name!r} ({err}); an external reward "
                         "is 'module:function', e.g. 'trl.rewards:think_format_reward'") from None
    if "build" in kw:
        fn = fn(**kw["build"])
    if not callable(fn):
        raise ValueError(f"reward {key!r} is not callable; a factory needs build={{...}} to make the reward function")
    name = getattr(fn, "__name__", attr)
    wrapped = Conversational(fn, name) if kw.get("conversational", True) else fn
    return registry.Entry(key=key, kind="reward", fn=wrapped, title=f"external reward {name}",
                          summary=f"{module_name}.{attr}, called with TRL's signature", family="external")


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
