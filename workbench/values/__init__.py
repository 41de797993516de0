"""The `value` slot: the critic's head and its losses (targets come from the advantage estimator)."""
from workbench.values import loss, soft_min  # noqa: F401  (registration at import)
from workbench.values.head import ValueHead
from workbench.values.loss import value_loss

__all__ = ["ValueHead", "value_loss"]
