"""The `sampler` slot: which examples enter each step
(`init(**hp) -> state; select(state, task, n, rng) -> examples; update(state, batch) -> state`)."""
from workbench.samplers import uniform  # noqa: F401  (registration at import)
