"""The `sampler` slot: which examples enter each step
(`init(**hp) -> state; select(state, task, n, rng) -> examples; update(state, batch) -> state`).
Every module here registers at import; `registry` imports them all."""
