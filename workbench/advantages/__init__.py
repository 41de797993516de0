"""Advantage estimators: `fn(batch, **hp) -> A [B, T]`, registered by name."""
from workbench.advantages import (  # noqa: F401  (registration)
    aepo, aepo_clip, baselines, dcpo, gae, gbpo, gigpo, group, gui_libra, hapo, reinforce, rlvmr, truncated)
