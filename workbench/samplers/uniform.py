"""The default sampler: fresh examples from the task each step, never from its held-out set."""
from __future__ import annotations

from workbench import registry


@registry.sampler(
    "uniform", title="Uniform task sampling", family="canonical",
    summary="Each step draws n new examples from the task's generator (or dataset), seeded by (seed, step, round).")
class Uniform:
    """Stateless: `select` is `task.sample(n, rng)`."""

    @staticmethod
    def init():
        return None

    @staticmethod
    def select(state, task, n, rng):
        return task.sample(n, rng)

    @staticmethod
    def update(state, batch):
        return state
