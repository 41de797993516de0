"""Advantage estimators: `fn(batch, **hp) -> A [B, T]`, registered by name."""
from workbench.advantages import baselines, gae, group, reinforce  # noqa: F401  (registration)
