"""The `controller` slot: state that lives across steps and drives a component parameter
(`init(**hp) -> state; update(state, batch, metrics) -> state; value(state) -> x`). Every module here registers at
import."""
from workbench.registry import import_submodules

import_submodules(__name__)

from workbench.controllers.adaptive_kl import AdaptiveKLController  # noqa: E402

__all__ = ["AdaptiveKLController"]
