"""The `controller` slot: state that lives across steps and drives a component parameter
(`init(**hp) -> state; update(state, batch, metrics) -> state; value(state) -> x`)."""
from workbench.controllers import (  # noqa: F401  (registration at import)
    adaptive_kl, entropy_target, epo, r2vpo, sac_temperature, safe)
from workbench.controllers.adaptive_kl import AdaptiveKLController

__all__ = ["AdaptiveKLController"]
