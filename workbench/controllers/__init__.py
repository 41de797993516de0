"""The `controller` slot: state that lives across steps and drives a component parameter
(`init(**hp) -> state; update(state, batch, metrics) -> state; value(state) -> x`)."""
from workbench.controllers import adaptive_kl  # noqa: F401  (registration at import)
from workbench.controllers.adaptive_kl import AdaptiveKLController

__all__ = ["AdaptiveKLController"]
