"""The `reward` slot (`fn(completions, **columns) -> list[float | None]`, TRL's signature) and the
`reward_shaping` slot (`fn(batch, ctx, **hp) -> batch`)."""
from workbench.rewards import length, shaping  # noqa: F401  (registration)
