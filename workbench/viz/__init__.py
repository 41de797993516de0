"""Figures (plotly), interactive explorers (ipywidgets) and HTML reports. The core never imports this package.

    from workbench.viz import surrogate_curves, clipping_explorer, write_report
"""
from workbench.viz.advantage_comparisons import advantage_bars  # noqa: F401
from workbench.viz.clip_curves import surrogate_curves  # noqa: F401
from workbench.viz.entropy_controls import entropy_heatmap  # noqa: F401
from workbench.viz.run_curves import DEFAULT_KEYS, accuracy_bar, training_curves  # noqa: F401
from workbench.viz.report import read_metrics, write_comparison, write_report  # noqa: F401
from workbench.viz.widgets import advantage_explorer, clipping_explorer  # noqa: F401

__all__ = [
    "DEFAULT_KEYS", "accuracy_bar", "advantage_bars", "entropy_heatmap", "surrogate_curves", "training_curves",
    "read_metrics", "write_comparison", "write_report", "advantage_explorer", "clipping_explorer",
]
