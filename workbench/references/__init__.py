"""The `reference` slot: `fn(model, ctx, **hp) -> model`, the policy's start (its frozen copy is the KL
reference)."""
from workbench.references import builders  # noqa: F401  (registration at import)
