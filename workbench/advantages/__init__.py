"""Advantage estimators: `fn(batch, **hp) -> A [B, T]`, registered by name (every module here registers at import)."""
from workbench.registry import import_submodules

import_submodules(__name__)
