"""No examples from the task: the step's rollout brings its own data (an offline preference dataset)."""
from __future__ import annotations

from workbench import registry


@registry.sampler(
    "none", title="No task examples", family="canonical",
    summary="The step takes no examples from the task: its rollout draws from data of its own (offline preference "
            "pairs, lists or steps, built once and kept as the rollout's state).")
class NoExamples:
    @staticmethod
    def init():
        return None

    @staticmethod
    def select(state, task, n, rng):
        return []

    @staticmethod
    def update(state, batch):
        return state
