"""The `group_transform` slot: finished groups edited before the forward passes (`fn(batch, ctx, **hp) -> batch`)."""
from workbench.transforms import (  # noqa: F401  (registration at import)
    aepo_resample, dynamic_sampling, eapo, greedy_baseline, vspo)
