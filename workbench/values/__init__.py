"""The `value` slot: the critic's head and its losses (targets come from the advantage estimator). Every module here
registers at import; `registry` imports them all."""
from workbench.values.head import ValueHead
from workbench.values.loss import value_loss

__all__ = ["ValueHead", "value_loss"]
