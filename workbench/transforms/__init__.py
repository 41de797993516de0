"""The `group_transform` slot: finished groups edited before the forward passes (`fn(batch, ctx, **hp) -> batch`).
Every module here registers at import; `registry` imports them all."""
