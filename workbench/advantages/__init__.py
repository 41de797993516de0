"""Advantage estimators: `fn(batch, **hp) -> A [B, T]`, registered by name."""
from workbench.advantages import baselines, gae, gigpo, group, reinforce, truncated  # noqa: F401  (registration)
