"""The `controller` slot: state that lives across steps and drives a component parameter
(`init(**hp) -> state; update(state, batch, metrics) -> state; value(state) -> x`). Every module here registers at
import; `registry` imports them all."""
from workbench.controllers.adaptive_kl import AdaptiveKLController

__all__ = ["AdaptiveKLController"]
