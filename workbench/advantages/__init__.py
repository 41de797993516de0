"""Advantage estimators: `fn(batch, **hp) -> A [B, T]`, registered by name (every module here registers at import;
`registry` imports them all), and `exact`: the exact advantage they estimate, on small enumerable problems."""
