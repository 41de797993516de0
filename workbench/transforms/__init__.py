"""The `group_transform` slot: finished groups edited before the forward passes (`fn(batch, ctx, **hp) -> batch`).
Every module here registers at import."""
from workbench.registry import import_submodules

import_submodules(__name__)
