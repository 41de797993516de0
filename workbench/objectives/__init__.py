"""Policy objectives: `fn(logp, old_logp, advantages, mask, *, agg, denom, **hp) -> (loss, metrics)` (every module
here registers at import)."""
from workbench.registry import import_submodules

import_submodules(__name__)
