"""The `group_transform` slot: finished groups edited before the forward passes (`fn(batch, ctx, **hp) -> batch`)."""
from workbench.transforms import dynamic_sampling, greedy_baseline  # noqa: F401  (registration at import)
