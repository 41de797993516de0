"""What every logged metric measures, and what a healthy curve of it looks like, gathered from their declarations.

Nothing here is written per metric. Each component declares the metrics it logs in its registration
(`logs={name: (what it measures, healthy range or shape and what a bad curve means)}`, `registry.Metric`), and the
loop declares its own next to the code that logs them (`LOOP_TABLES`). A new component or metric edits no list here.

`GLOSSARY`: metric name -> what it measures (one line). `HEALTHY`: metric name -> the healthy range or shape of
its curve on these runs, and what a bad curve means. Both have exactly the same keys, in the same order: the loop's
first, then the components' by kind. `unexplained(names)` is what no declaration covers; every metric a recipe
logs must be covered (tests/train/test_trainer.py, tests/train/test_pipeline.py), and notebook 06 and the book's
glossary page show the two side by side. Both dicts are built at first use, since gathering imports every
component and the loop (importing `PER_REWARD` stays cheap).
"""
from __future__ import annotations

import functools
import importlib
import re

from workbench import registry

PER_REWARD = re.compile(r"rewards/[^/]+/(mean|std)")  # one pair per reward of a recipe: "rewards/<name>/mean"

# The loop's own metrics: "module:TABLE" of each module that logs some, a table as a component's `logs`.
LOOP_TABLES = ("workbench.train.trainer:LOOP_METRICS", "workbench.train.pipeline:PIPELINE_METRICS",
               "workbench.train.guards:GUARD_METRICS", "workbench.rewards.stage:REWARD_METRICS")


def declarations() -> list[tuple[str, registry.Metric]]:
    """(who declares it, Metric) for every declaration: the loop's tables, then each registered component's `logs`."""
    out = []
    for spec in LOOP_TABLES:
        module, _, table = spec.partition(":")
        out += [(spec, m) for m in registry.metrics(getattr(importlib.import_module(module), table), spec)]
    out += [(f"{e.kind}:{e.key}", m) for e in registry.entries() for m in e.logs]
    return out


@functools.cache
def gather() -> tuple[dict[str, str], dict[str, str]]:
    """(GLOSSARY, HEALTHY) from every declaration; a name declared twice must have the same texts (a shared
    constant in the module that computes it), else ValueError naming both declarations."""
    glossary, healthy, first = {}, {}, {}
    for who, m in declarations():
        if m.name in first and (glossary[m.name], healthy[m.name]) != (m.measures, m.healthy):
            raise ValueError(f"metric {m.name!r} is declared by {first[m.name]} and by {who} with different texts; "
                             f"declare it once, as a shared constant of the module that computes it, and use that")
        first.setdefault(m.name, who)
        glossary[m.name], healthy[m.name] = m.measures, m.healthy
    return glossary, healthy


def __getattr__(name: str):
    if name in ("GLOSSARY", "HEALTHY"):
        return gather()[name == "HEALTHY"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def unexplained(names) -> set[str]:
    """The metric names no declaration covers (a placeholder declaration such as `rewards/<name>/mean` covers every
    name it matches)."""
    metrics = [m for _, m in declarations()]
    return {n for n in names if not any(m.matches(n) for m in metrics)}
