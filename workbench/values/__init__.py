"""The `value` slot: the critic's head and its losses (targets come from the advantage estimator). Every module here
registers at import."""
from workbench.registry import import_submodules

import_submodules(__name__)

from workbench.values.head import ValueHead  # noqa: E402
from workbench.values.loss import value_loss  # noqa: E402

__all__ = ["ValueHead", "value_loss"]
