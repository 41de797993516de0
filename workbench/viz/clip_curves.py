"""One policy objective against the ratio r = π / π_old: its per-token value −ℓ(r) and gradient weight ∂(−ℓ)/∂log π
for A > 0 and A < 0, the clip band [1 − ε_low, 1 + ε_high] shaded and a dual-clip cap marked (notebook 01, and
`workbench.viz.widgets.clipping_explorer`). Both curves come from the registered objective itself (autograd).

    from workbench.viz.clip_curves import surrogate_curves
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from workbench import registry
from workbench.viz.style import NEGATIVE, NEUTRAL, POSITIVE


def surrogate_terms(fn, ratios: torch.Tensor, advantage: float, **hp) -> tuple[np.ndarray, np.ndarray]:
    """Per-token objective -l(r) and gradient weight d(-l)/d(log pi) of a registered objective, [N] each.

    Each ratio is one token in its own row (old_logp = 0, so logp = log r). The objective value is
    evaluated one token at a time; the gradient comes from one batched call whose token-mean loss is
    multiplied by N, which makes d(N * mean)/d(logp_i) the i-th token's own gradient.
    """
    r = ratios.reshape(-1, 1)
    logp = r.log().requires_grad_(True)
    old_logp = torch.zeros_like(r)
    adv = torch.full_like(r, float(advantage))
    mask = torch.ones_like(r)
    loss, _ = fn(logp, old_logp, adv, mask, agg="token-mean", **hp)
    (grad,) = torch.autograd.grad(-loss * r.shape[0], logp)
    with torch.no_grad():
        values = [-fn(logp[i:i + 1], old_logp[i:i + 1], adv[i:i + 1], mask[i:i + 1], agg="token-mean",
                      **hp)[0] for i in range(r.shape[0])]
    return torch.stack(values).double().numpy(), grad.flatten().double().numpy()


def band_shape(x0: float, x1: float, xref: str) -> dict:
    """A shaded vertical band over the full height of the subplot whose x axis is `xref`."""
    return dict(type="rect", x0=x0, x1=x1, xref=xref, y0=0, y1=1, yref=f"y{xref[1:]} domain",
                fillcolor="#2ca02c", opacity=0.12, line_width=0, layer="below")


def vline_shape(x: float, xref: str, color: str, dash: str) -> dict:
    return dict(type="line", x0=x, x1=x, xref=xref, y0=0, y1=1, yref=f"y{xref[1:]} domain",
                line=dict(color=color, dash=dash, width=1))


def default_ratios() -> torch.Tensor:
    # 0.02..2.5: both clip sides and a dual-clip cap up to 2.5 are in view. 150 points keep a slider
    # redraw near 0.15 s (the value curve costs one objective call per point) and miss the usual band
    # edges 0.8 / 1.2 / 1.28, where the max() tie would split the gradient in half.
    return torch.linspace(0.02, 2.5, 150, dtype=torch.float64)


def surrogate_curves(objective: str = "ppo-clip", advantage: float = 1.0, ratios=None, *,
                     signs: Sequence[int] = (1, -1), **hp) -> go.Figure:
    """Per-token objective -l and gradient weight d(-l)/d(log pi) against the ratio r, for A > 0 and A < 0.

    objective: a registered objective key; `hp` goes to it (eps_low, eps_high, dual_clip_c, ...).
    advantage: |A|; the curves use +|A| and -|A|.
    ratios: 1-D grid of r > 0 (default 0.02..2.5).
    signs: which of (+1, -1) are visible; both traces are always built so a widget can toggle them.
    The band [1 - eps_low, 1 + eps_high] is shaded; a dual-clip cap c is marked on the A < 0 side.
    """
    entry = registry.get("objective", objective)
    ratios = default_ratios() if ratios is None else torch.as_tensor(ratios, dtype=torch.float64).flatten()
    if bool((ratios <= 0).any()):
        raise ValueError("ratios must be > 0 (r = pi / pi_old)")
    setting = {**entry.defaults, **hp}
    eps_low, eps_high, dual_c = setting.get("eps_low"), setting.get("eps_high"), setting.get("dual_clip_c")
    magnitude = abs(float(advantage))
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1, subplot_titles=(
        "objective per token  −ℓ(r)", "gradient weight  ∂(−ℓ)/∂log π"))
    x = ratios.numpy()
    for sign, color in ((1, POSITIVE), (-1, NEGATIVE)):
        value, weight = surrogate_terms(entry.fn, ratios, sign * magnitude, **hp)
        name = f"A = {sign * magnitude:+g}"
        visible = sign in signs
        fig.add_trace(go.Scatter(x=x, y=value, name=name, legendgroup=name, visible=visible,
                                 line=dict(color=color), hovertemplate="r %{x:.3f}<br>−ℓ %{y:.4g}<extra></extra>"),
                      row=1, col=1)
        fig.add_trace(go.Scatter(x=x, y=weight, name=name, legendgroup=name, visible=visible, showlegend=False,
                                 line=dict(color=color),
                                 hovertemplate="r %{x:.3f}<br>∂(−ℓ)/∂log π %{y:.4g}<extra></extra>"),
                      row=1, col=2)
    shapes, annotations = [], []
    if eps_low is not None and eps_high is not None:
        shapes += [band_shape(1 - eps_low, 1 + eps_high, axis) for axis in ("x", "x2")]
    shapes += [vline_shape(1.0, axis, NEUTRAL, "dot") for axis in ("x", "x2")]
    if dual_c is not None and -1 in signs:
        shapes += [vline_shape(dual_c, axis, NEGATIVE, "dash") for axis in ("x", "x2")]
        annotations += [dict(x=dual_c, xref=axis, y=1, yref=f"y{axis[1:]} domain", text=f"dual clip c = {dual_c:g}",
                             showarrow=False, xanchor="right", yanchor="top", font=dict(color=NEGATIVE, size=11))
                        for axis in ("x", "x2")]
    band = f", ε_low = {eps_low:g}, ε_high = {eps_high:g}" if eps_low is not None and eps_high is not None else ""
    fig.update_xaxes(title_text="ratio r = π / π_old")
    # One layout update with plain dicts: add_vline/add_vrect(row="all") cost ~0.1 s each, too slow for a slider.
    fig.update_layout(title=f"{objective}: |A| = {magnitude:g}{band}", template="plotly_white", height=420,
                      legend=dict(orientation="h", y=-0.2), shapes=shapes,
                      annotations=[*fig.layout.annotations, *annotations])
    return fig
