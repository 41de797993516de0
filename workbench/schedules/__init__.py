"""The `schedule` slot: pure functions of training progress `fn(step, total, **hp) -> float` that drive a
component parameter (`use(key, into="objective:mdpo.inv_t")`)."""
from workbench.schedules import mdpo  # noqa: F401  (registration at import)
