"""What every figure shares: the colours (one per run, one per sign), how a notebook stores a plotly figure, and
small helpers for numbers, arrays, token text and axes. No figure lives here.

    from workbench.viz.style import RUN_COLORS, POSITIVE, NEGATIVE, is_number
"""
from __future__ import annotations

import html
import math

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.colors import qualitative

PLOTLY_MIME = "application/vnd.plotly.v1+json"  # how a notebook stores a plotly figure
# One colour per run or recipe for up to 24 of them: plotly's ten first (the figures' usual look), then fourteen
# darker ones from Dark24 chosen to stay apart from those ten (a comparison of 8-12 recipes never reuses a colour).
RUN_COLORS = list(qualitative.Plotly) + ["#222A2A", "#B68100", "#750D86", "#1616A7", "#862A16", "#1CA71C", "#778AAE",
                                         "#6C7C32", "#AF0038", "#B2828D", "#0D2A63", "#6C4516", "#FB0D0D", "#DA16FF"]
POSITIVE, NEGATIVE, NEUTRAL = "#1f77b4", "#d62728", "#7f7f7f"
SIGNED_SCALE = "RdBu"  # a colour scale for signed values (advantages, gradient weights): red < 0 < blue


def is_number(value) -> bool:
    return isinstance(value, (int, float, np.number)) and not isinstance(value, bool) and math.isfinite(value)


def to_numpy(x) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=np.float64)


def display_token(token: str) -> str:
    # Plotly renders cell text as HTML-like markup, so "<" must be escaped; whitespace made visible.
    return html.escape(str(token).replace("\n", "↵").replace("\t", "⇥"))


def title_step_axes(fig: go.Figure, panels: int, cols: int, text: str = "step") -> None:
    """Title the x axis of every panel with no panel below it (the bottom of each column) "step": a run chart's x
    axis says what it counts, also in a column whose last row is empty."""
    for i in range(panels):
        if i + cols >= panels:
            fig.update_xaxes(title_text=text, row=i // cols + 1, col=i % cols + 1)


def log_tickvals(values, most: int = 6) -> list[float] | None:
    """Tick values for a log axis over `values` that never crowd: 1-2-5 steps when they give at most `most` ticks,
    else powers of ten (every n-th decade when there are more than `most`). None when the values span less than a
    factor 3 (plotly's own ticks read well there) or hold no positive number."""
    v = np.asarray([x for x in np.ravel(np.asarray(values, dtype=float)) if np.isfinite(x) and x > 0])
    if not len(v) or v.max() < 3 * v.min():
        return None
    lo, hi = math.floor(math.log10(v.min())), math.ceil(math.log10(v.max()))
    for mantissas in ((1, 2, 5), (1, 3), (1,)):
        ticks = [m * 10.0 ** e for e in range(lo, hi + 1) for m in mantissas if v.min() <= m * 10.0 ** e <= v.max()]
        if 2 <= len(ticks) <= most:
            return ticks
    decades = [10.0 ** e for e in range(lo, hi + 1)]
    return decades[::math.ceil(len(decades) / most)]
