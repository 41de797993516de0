"""The `buffer` slot: replay storage kept across steps
(`init(**hp) -> state; add(state, batch, step) -> state; draw(state, n, rng) -> (batch, state)`)."""
