"""Figures for the clipping zoo, the advantage estimators side by side and the metric glossary.

Pure functions (data in, `go.Figure` or HTML text out), except `zoo_explorer`, which wraps
`gradient_weight_figure` in ipywidgets. Every number drawn from the library's math is computed by calling the
registered component itself (autograd through the objective, the estimator on a batch), so the figures
follow the code, including objectives registered after this file was written.

    from workbench.viz.zoo import gradient_weight_surface, gradient_weight_grid, zoo_explorer
"""
from __future__ import annotations

import html
import inspect
import math
import textwrap
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from workbench import ops, registry
from workbench.batch import RolloutBatch
from workbench.viz.figures import (NEGATIVE, NEUTRAL, POSITIVE, RUN_COLORS, is_number, metric_series, title_step_axes,
                                   to_numpy)

ZERO_COLOR = "#b0b0b0"  # cells where the gradient is exactly zero (the clipped branch is active)
WEIGHT_SCALE = "RdBu"   # red: the token is pushed down, blue: pushed up


# ----------------------------------------------------------------------------------------------------
# The per-token gradient weight of every policy objective


OWN_FIGURES = {"surrogate": "workbench.viz.beyond (notebook 10)", "credit": "notebook 13"}


def policy_objectives() -> list:
    """Registered policy objectives (registry entries) outside families F2 and F4, sorted by key; new registrations
    appear here. F2's objectives read inputs besides (r, A) (a token's entropy, GBPO's target, the off-policy flag,
    ...): `workbench.viz.beyond` draws them with those inputs as knobs (notebook 10). F4's act on a turn's or a
    chunk's tokens together or regress values from the LM head (notebook 13). The critic's loss is a `value`
    component, not an objective, so every entry here takes logp first."""
    return [e for e in registry.entries("objective") if e.family not in OWN_FIGURES]


def extra_inputs(fn, old_logp: torch.Tensor) -> dict:
    """Required keyword-only inputs beyond the signature's slots: any `*_logp` (e.g. tis's `mu_logp`, the
    rollout engine's log-probs) is set to `old_logp`, i.e. no engine/trainer mismatch."""
    out = {}
    for name, p in inspect.signature(fn).parameters.items():
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is inspect.Parameter.empty:
            if not name.endswith("_logp"):
                raise TypeError(f"{getattr(fn, '__name__', fn)} needs the keyword {name!r}, which the zoo "
                                "cannot fill in (only *_logp inputs are set to old_logp; F2 objectives: "
                                "workbench.viz.beyond)")
            out[name] = old_logp
    return out


def default_weight_ratios() -> np.ndarray:
    # Step 0.05 offset by 0.025: no point lands on a clip edge (0.8, 1.2, 1.28, e^±0.4 ...) or on a
    # dual-clip cap (1.5, 2, 3, ...), where max()/clamp ties would split the gradient.
    return np.linspace(0.025, 3.975, 80)


def default_weight_advantages() -> np.ndarray:
    return np.round(np.linspace(-1.0, 1.0, 21), 10)  # step 0.1, includes 0 and +-1


def gradient_weight_surface(key: str, ratios=None, advantages=None, **hp) -> np.ndarray:
    """Per-token gradient weight d(-l)/d(log pi) of a registered policy objective on a grid, [len(A), len(r)].

    Every (A, r) pair is one sequence of ONE token (old_logp = 0, logp = log r), so sequence-level objectives
    (gspo, luspo, geo_mean) reduce to their per-token form. The objective is called once on the whole grid
    with its own default aggregation (`entry.defaults["agg"]`, which gspo / geo_mean / luspo require) and
    `Denominators(1, 1, 1)`, so the aggregated loss is the plain sum of the per-token losses and autograd
    returns each token's own weight. `hp` goes to the objective (eps_low, eps_high, dual_clip_c, tau_pos, ...);
    a required `*_logp` keyword (tis's `mu_logp`) is set to old_logp.

    For ppo-clip the weight is A r where the unclipped branch is active and 0 where the clipped one is.
    """
    entry = registry.get("objective", key)
    r = torch.as_tensor(default_weight_ratios() if ratios is None else ratios, dtype=torch.float64).flatten()
    a = torch.as_tensor(default_weight_advantages() if advantages is None else advantages,
                        dtype=torch.float64).flatten()
    if bool((r <= 0).any()):
        raise ValueError("ratios must be > 0 (r = pi / pi_old)")
    A, R = torch.meshgrid(a, r, indexing="ij")
    logp = R.reshape(-1, 1).log().requires_grad_(True)
    old_logp = torch.zeros_like(logp)
    mask = torch.ones_like(logp)
    agg = entry.defaults.get("agg", "token-mean")
    denom = ops.Denominators(num_tokens=1.0, num_seqs=1.0, norm_constant=1.0)
    loss, _ = entry.fn(logp, old_logp, A.reshape(-1, 1).clone(), mask, agg=agg, denom=denom,
                       **extra_inputs(entry.fn, old_logp), **hp)
    (grad,) = torch.autograd.grad(-loss, logp, allow_unused=True)
    if grad is None:  # the loss does not depend on logp at all
        grad = torch.zeros_like(logp)
    return grad.reshape(A.shape).detach().double().numpy()


def hp_label(hp: Mapping) -> str:
    return ", ".join(f"{k}={v:g}" if is_number(v) else f"{k}={v}" for k, v in hp.items())


def weight_heatmaps(key, ratios, advantages, hp, coloraxis: str | None):
    """(weight heatmap, zero-gradient overlay, surface) for one objective."""
    w = gradient_weight_surface(key, ratios, advantages, **hp)
    # 1 where the weight is exactly 0 (and A != 0), drawn grey; 0 transparent. uint8 / float32 keep the
    # figure JSON (base64 arrays) small.
    zero = ((np.abs(w) < 1e-12) & (np.abs(np.asarray(advantages))[:, None] > 0)).astype(np.uint8)
    heat = go.Heatmap(x=ratios, y=advantages, z=w.astype(np.float32), name=key, zmid=0 if coloraxis is None else None,
                      colorscale=WEIGHT_SCALE if coloraxis is None else None, coloraxis=coloraxis,
                      colorbar=dict(title="∂(−ℓ)/∂log π") if coloraxis is None else None,
                      hovertemplate=f"{html.escape(key)}<br>r %{{x:.3f}}<br>A %{{y:+.3f}}<br>"
                                    "weight %{z:.4g}<extra></extra>")
    overlay = go.Heatmap(x=ratios, y=advantages, z=zero, zmin=0, zmax=1, showscale=False, hoverinfo="skip",
                         colorscale=[[0, "rgba(0,0,0,0)"], [0.5, "rgba(0,0,0,0)"], [0.5, ZERO_COLOR], [1, ZERO_COLOR]],
                         name="zero gradient")
    return heat, overlay, w


def weight_and_slices(heat, overlay, ratios, slices, *, widths=(0.55, 0.45), spacing=0.14) -> go.Figure:
    """Left: a weight heatmap over (r, A) with its zero-gradient overlay, its colour bar in the gap after it; right:
    `slices` [2, len(r)], the weights at A = +1 and A = -1, its y axis on its right so that the gap holds the colour
    bar alone. Four traces and fixed shapes, so a widget can redraw it in place; the caller sets the title."""
    left_end = widths[0] / sum(widths) * (1 - spacing)  # where make_subplots ends the left panel
    heat.colorbar = dict(title="weight", x=left_end + 0.01, xanchor="left", len=0.9, thickness=14)
    fig = make_subplots(rows=1, cols=2, column_widths=list(widths), horizontal_spacing=spacing,
                        subplot_titles=("weight over (r, A); grey = exactly 0", "slices at A = ±1"))
    fig.add_trace(heat, row=1, col=1)
    fig.add_trace(overlay, row=1, col=1)
    for row, (A, color) in enumerate(((1.0, POSITIVE), (-1.0, NEGATIVE))):
        fig.add_trace(go.Scatter(x=ratios, y=slices[row], name=f"A = {A:+g}", line=dict(color=color),
                                 hovertemplate="r %{x:.3f}<br>weight %{y:.4g}<extra></extra>"), row=1, col=2)
    shapes = [dict(type="line", x0=1, x1=1, xref=ax, y0=0, y1=1, yref=f"{ax.replace('x', 'y')} domain",
                   line=dict(color=NEUTRAL, dash="dot", width=1)) for ax in ("x", "x2")]
    fig.update_xaxes(title_text="ratio r = π / π_old")
    fig.update_yaxes(title_text="advantage A", row=1, col=1)
    fig.update_yaxes(title_text="∂(−ℓ)/∂log π", side="right", row=1, col=2)
    fig.update_layout(template="plotly_white", shapes=shapes, legend=dict(orientation="h", x=0.6, y=-0.18))
    return fig


def gradient_weight_figure(key: str = "ppo-clip", ratios=None, advantages=None, **hp) -> go.Figure:
    """Left: the weight d(-l)/d(log pi) over (r, A) as a heatmap, grey where it is exactly 0.
    Right: slices at A = +1 and A = -1. Four traces and fixed shapes, so a widget can redraw it in place."""
    ratios = default_weight_ratios() if ratios is None else np.asarray(ratios, dtype=float).flatten()
    advantages = default_weight_advantages() if advantages is None else np.asarray(advantages, float).flatten()
    heat, overlay, _ = weight_heatmaps(key, ratios, advantages, hp, None)
    fig = weight_and_slices(heat, overlay, ratios, gradient_weight_surface(key, ratios, [1.0, -1.0], **hp))
    title = f"{key}: per-token gradient weight" + (f" ({hp_label(hp)})" if hp else "")
    fig.update_layout(title=title, height=430)
    return fig


def panel_spec(panel) -> tuple[str, dict]:
    return (panel, {}) if isinstance(panel, str) else (panel[0], dict(panel[1]))


def heatmap_grid(panels: Sequence[tuple[str, Callable]], cols: int, vertical_spacing: float = 0.3,
                 horizontal_spacing: float = 0.06) -> tuple[go.Figure, int, float]:
    """(figure, rows, peak |weight|): one subplot per (title, make) panel, `make()` -> (heatmap, zero overlay, weights)
    drawn on the shared colour axis "coloraxis" with a dotted line at r = 1; a panel whose `make` raises shows the
    error instead (a new objective never breaks the grid). The caller sets the title, height and colour axis."""
    cols = max(1, min(cols, len(panels)))
    rows = max(1, math.ceil(len(panels) / cols))
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[t for t, _ in panels] or None,
                        horizontal_spacing=horizontal_spacing, vertical_spacing=min(0.4 * vertical_spacing,
                                                                                    vertical_spacing / rows))
    peak, notes = 0.0, []
    for i, (_, make) in enumerate(panels):
        row, col = i // cols + 1, i % cols + 1
        try:
            heat, overlay, w = make()
        except Exception as err:  # noqa: BLE001 - shown in the panel
            n = i + 1
            notes.append(dict(x=0.5, y=0.5, xref=f"x{n if n > 1 else ''} domain", yref=f"y{n if n > 1 else ''} domain",
                              text="<br>".join(textwrap.wrap(f"{type(err).__name__}: {err}", 40)[:6]),
                              showarrow=False, font=dict(size=10, color=NEGATIVE)))
            continue
        peak = max(peak, float(np.nanmax(np.abs(w))))
        fig.add_trace(heat, row=row, col=col)
        fig.add_trace(overlay, row=row, col=col)
    shapes = [dict(type="line", x0=1, x1=1, xref=f"x{i + 1 if i else ''}", y0=0, y1=1,
                   yref=f"y{i + 1 if i else ''} domain", line=dict(color="black", dash="dot", width=1))
              for i in range(len(panels))]
    title_step_axes(fig, len(panels), cols, "ratio r")  # under the last panel of each column
    for r_ in range(1, rows + 1):
        fig.update_yaxes(title_text="A", row=r_, col=1)
    fig.update_layout(annotations=[*fig.layout.annotations, *notes], shapes=shapes, template="plotly_white")
    return fig, rows, peak


def gradient_weight_grid(panels: Sequence | None = None, ratios=None, advantages=None, cols: int = 3,
                         title: str | None = None) -> go.Figure:
    """One heatmap of d(-l)/d(log pi) over (r, A) per objective, one shared colour scale, zeros in grey.

    panels: objective keys or (key, hp) pairs; default: every registered policy objective at its defaults.
    A panel whose objective raises shows the error message instead (a new objective never breaks the grid).
    """
    panels = [panel_spec(p) for p in (panels if panels is not None else [e.key for e in policy_objectives()])]
    ratios = default_weight_ratios() if ratios is None else np.asarray(ratios, dtype=float).flatten()
    advantages = default_weight_advantages() if advantages is None else np.asarray(advantages, float).flatten()
    # a panel's settings under its name, wrapped to the panel's width; the rows move apart to hold them
    cells = [(key + ("<br><span style='font-size:10px'>" + "<br>".join(textwrap.wrap(hp_label(hp), 36)) + "</span>"
                     if hp else ""),
              lambda key=key, hp=hp: weight_heatmaps(key, ratios, advantages, hp, "coloraxis")) for key, hp in panels]
    lines = max((len(textwrap.wrap(hp_label(hp), 36)) for _, hp in panels), default=0)
    fig, rows, peak = heatmap_grid(cells, cols, vertical_spacing=0.3 + 0.15 * lines)
    fig.update_layout(  # the title at the top, clear of panel names that grow upwards by their settings' lines
        title=dict(y=1, yanchor="top", pad=dict(t=25), text=title or "per-token gradient weight ∂(−ℓ)/∂log π "
                   "(blue: up, red: down, grey: exactly zero)"),
        height=max(360, (270 + 25 * lines) * rows), margin=dict(t=90 + 25 * lines),
        coloraxis=dict(colorscale=WEIGHT_SCALE, cmin=-(peak or 1), cmax=peak or 1, cmid=0,
                       colorbar=dict(title="weight")))
    return fig


def gradient_weight_slices(keys: Sequence[str] | None = None, ratios=None, advantages=(1.0, -1.0),
                           hp: Mapping[str, Mapping] | None = None) -> go.Figure:
    """d(-l)/d(log pi) against r at fixed advantages (one subplot per A), one line per objective.

    Objectives whose curves coincide on the whole grid share one line, named "a = b = c", so overlapping
    lines cannot hide each other.
    """
    keys = list(keys) if keys is not None else [e.key for e in policy_objectives()]
    ratios = default_weight_ratios() if ratios is None else np.asarray(ratios, dtype=float).flatten()
    hp = dict(hp or {})
    curves: list[tuple[list[str], np.ndarray]] = []
    for key in keys:
        w = gradient_weight_surface(key, ratios, advantages, **hp.get(key, {}))
        same = next((c for c in curves if np.allclose(c[1], w, atol=1e-9)), None)
        if same is not None:
            same[0].append(key)
        else:
            curves.append(([key], w))
    fig = make_subplots(rows=1, cols=len(advantages), subplot_titles=[f"A = {a:+g}" for a in advantages],
                        horizontal_spacing=0.08)
    dashes = ("solid", "dash", "dot", "dashdot")
    for i, (names, w) in enumerate(curves):
        name = " = ".join(names)
        line = dict(color=RUN_COLORS[i % len(RUN_COLORS)], dash=dashes[(i // len(RUN_COLORS)) % len(dashes)])
        for j in range(len(advantages)):
            fig.add_trace(go.Scatter(x=ratios, y=w[j], name=name, legendgroup=name, showlegend=j == 0, line=line,
                                     hovertemplate=f"{html.escape(name)}<br>r %{{x:.3f}}<br>weight %{{y:.4g}}"
                                                   "<extra></extra>"),
                          row=1, col=j + 1)
    fig.update_xaxes(title_text="ratio r = π / π_old")
    fig.update_yaxes(title_text="∂(−ℓ)/∂log π", row=1, col=1)
    fig.update_layout(title="gradient weight against the ratio (objectives with identical curves share a line)",
                      template="plotly_white", height=440, legend=dict(orientation="h", y=-0.25))
    return fig


# Slider ranges for the explorer: (widget kind, min, max, step or base). Each slider is enabled only for
# objectives that take the hyper-parameter with a numeric default (dual_clip_c: any objective taking it).
EXPLORER_HP = {
    "eps_low": ("log", -4, math.log10(0.9)),
    "eps_high": ("log", -4, 0.0),
    "tau_pos": ("log", -1.3, 1.3),
    "tau_neg": ("log", -1.3, 1.3),
    "dual_clip_c": ("select", (("off", 0.0), ("1.5", 1.5), ("2", 2.0), ("3", 3.0), ("3.5", 3.5))),
    "cap_abs": ("linear", 1.0, 6.0, 0.1),
}


def zoo_explorer(objective: str = "ppo-clip"):
    """Dropdown over every policy objective and sliders for ε_low, ε_high, τ_pos, τ_neg, the dual-clip cap c
    and CISPO's cap, redrawing `gradient_weight_figure`. Sliders an objective does not take are disabled;
    choosing an objective resets the sliders to its defaults. Returns an ipywidgets.VBox with `.figure`,
    `.controls` and `.update` attached (as the explorers of `workbench.viz.widgets`)."""
    import ipywidgets as W

    from workbench.viz.widgets import refresh

    keys = [e.key for e in policy_objectives()]
    choice = W.Dropdown(options=keys, value=objective if objective in keys else keys[0], description="objective")
    sliders = {}
    for name, spec in EXPLORER_HP.items():
        if spec[0] == "log":
            sliders[name] = W.FloatLogSlider(value=0.2, base=10, min=spec[1], max=spec[2], step=0.02,
                                             description=name, readout_format=".3g", continuous_update=False)
        elif spec[0] == "select":
            sliders[name] = W.SelectionSlider(options=list(spec[1]), value=0.0, description=name,
                                              continuous_update=False)
        else:
            sliders[name] = W.FloatSlider(value=spec[1], min=spec[1], max=spec[2], step=spec[3], description=name,
                                          continuous_update=False)
    state = {"hold": False}

    def applicable(key) -> dict:
        defaults = registry.get("objective", key).defaults
        return {n: defaults[n] for n in EXPLORER_HP if n in defaults and (is_number(defaults[n]) or n == "dual_clip_c")}

    def current_hp() -> dict:
        hp = {}
        for name in applicable(choice.value):
            value = sliders[name].value
            hp[name] = (value or None) if name == "dual_clip_c" else float(value)
        return hp

    figure = None  # built below, once the sliders hold the chosen objective's defaults

    def update(change=None):
        if not state["hold"] and figure is not None:
            refresh(figure, gradient_weight_figure(choice.value, **current_hp()))

    def reset(change=None):
        state["hold"] = True
        try:
            take = applicable(choice.value)
            for name, slider in sliders.items():
                slider.disabled = name not in take
                if name in take:
                    default = take[name]
                    if name == "dual_clip_c":
                        options = [v for _, v in slider.options]
                        slider.value = default if default in options else 0.0
                    elif isinstance(slider, W.FloatLogSlider):
                        slider.value = min(max(float(default), 10 ** slider.min), 10 ** slider.max)
                    else:
                        slider.value = min(max(float(default), slider.min), slider.max)
        finally:
            state["hold"] = False
        update()

    choice.observe(reset, names="value")
    for slider in sliders.values():
        slider.observe(update, names="value")
    reset()
    figure = go.FigureWidget(gradient_weight_figure(choice.value, **current_hp()))
    names = list(sliders)
    controls = W.HBox([W.VBox([choice, *[sliders[n] for n in names[:2]]]), W.VBox([sliders[n] for n in names[2:4]]),
                       W.VBox([sliders[n] for n in names[4:]])])
    box = W.VBox([controls, figure])
    box.figure, box.update = figure, update
    box.controls = {"objective": choice, **sliders}
    return box


# ----------------------------------------------------------------------------------------------------
# Clip fractions on real rollouts


def clip_fraction_figure(records: Sequence[Mapping], key: str = "clip/region") -> go.Figure:
    """Clip fraction per optimizer step within a rollout batch, for each number of steps per batch mu.

    records: one dict per optimizer step with "mu" (optimizer steps per rollout batch), "update" (1..mu,
    the position of this step within its batch) and the objective's metrics (`key`).
    Left: `key` against the update index, averaged over rollout batches, one line per mu.
    Right: the batch average per mu (what the trainer logs: the mean over its mu optimizer steps).
    """
    by_mu: dict[int, dict[int, list[float]]] = {}
    for rec in records:
        if is_number(rec.get(key)):
            by_mu.setdefault(int(rec["mu"]), {}).setdefault(int(rec["update"]), []).append(float(rec[key]))
    fig = make_subplots(rows=1, cols=2, column_widths=[0.62, 0.38], horizontal_spacing=0.12,
                        subplot_titles=("per optimizer step (mean over batches)", "batch mean (what is logged)"))
    mus = sorted(by_mu)
    for i, mu in enumerate(mus):
        updates = sorted(by_mu[mu])
        ys = [float(np.mean(by_mu[mu][u])) for u in updates]
        fig.add_trace(go.Scatter(x=updates, y=ys, mode="lines+markers", name=f"μ = {mu}",
                                 line=dict(color=RUN_COLORS[i % len(RUN_COLORS)]),
                                 hovertemplate=f"μ = {mu}<br>update %{{x}}<br>{key} %{{y:.4f}}<extra></extra>"),
                      row=1, col=1)
    means = [float(np.mean([v for vs in by_mu[mu].values() for v in vs])) for mu in mus]
    fig.add_trace(go.Bar(x=[f"μ = {mu}" for mu in mus], y=means, showlegend=False,
                         marker_color=[RUN_COLORS[i % len(RUN_COLORS)] for i in range(len(mus))],
                         text=[f"{m:.2%}" for m in means], textposition="outside"), row=1, col=2)
    fig.update_xaxes(title_text="optimizer step within the rollout batch", dtick=1, row=1, col=1)
    fig.update_yaxes(title_text=key, tickformat=".1%", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(tickformat=".1%", rangemode="tozero", row=1, col=2)
    fig.update_layout(title=f"{key}: r ≡ 1 on the first optimizer step of every rollout batch",
                      template="plotly_white", height=420)
    return fig


def staleness_figure(rows: Sequence[Mapping], keys: Sequence[str] = ("clip/region", "clip/out_of_band"),
                     x: str = "staleness") -> go.Figure:
    """Clip fractions of a FIXED old batch against how many policy updates happened since it was sampled."""
    fig = go.Figure()
    for i, key in enumerate(keys):
        xs, ys = metric_series([{"step": row[x], **row} for row in rows], key)
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers", name=key,
                                 line=dict(color=RUN_COLORS[i % len(RUN_COLORS)]),
                                 hovertemplate=f"{key}<br>{x} %{{x}}<br>%{{y:.4f}}<extra></extra>"))
    fig.update_xaxes(title_text="policy updates since the batch was sampled (staleness)", dtick=1)
    fig.update_yaxes(tickformat=".1%", rangemode="tozero", title_text="fraction of tokens")
    fig.update_layout(title="stale old_logp: the same batch re-scored by a policy that kept training",
                      template="plotly_white", height=380)
    return fig


# ----------------------------------------------------------------------------------------------------
# Advantage estimators side by side


def sample_labels(batch: RolloutBatch) -> list[str]:
    rewards = batch.rewards.tolist() if batch.rewards is not None else [float("nan")] * batch.size
    return [f"{i}: g{int(g)} R={r:g} |y|={int(n)}"
            for i, (g, r, n) in enumerate(zip(batch.group.tolist(), rewards, batch.lengths.tolist()))]


def token_summary(adv, mask) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-sample (mean, min, max) of an advantage [B, T] over the valid tokens."""
    a, m = to_numpy(adv), to_numpy(mask) > 0
    masked = np.where(m, a, np.nan)
    with np.errstate(invalid="ignore"):
        return np.nanmean(masked, 1), np.nanmin(masked, 1), np.nanmax(masked, 1)


def advantage_comparison(results: Mapping, batch: RolloutBatch, title: str | None = None) -> go.Figure:
    """Grouped bars: per sample, the mean advantage over its tokens for every estimator; the error bars span
    the min..max over tokens (token-level estimators such as gae vary along the response).

    results: estimator key -> [B, T] advantages, or an error message (str), listed under the chart.
    """
    labels = sample_labels(batch)
    fig = go.Figure()
    errors = []
    for i, (key, adv) in enumerate(results.items()):
        if isinstance(adv, str):
            errors.append(f"{key}: {adv}")
            continue
        mean, lo, hi = token_summary(adv, batch.mask)
        fig.add_trace(go.Bar(x=labels, y=mean, name=key, marker_color=RUN_COLORS[i % len(RUN_COLORS)],
                             error_y=dict(type="data", symmetric=False, array=hi - mean, arrayminus=mean - lo,
                                          thickness=1, width=2),
                             hovertemplate=f"{html.escape(key)}<br>%{{x}}<br>mean A %{{y:+.3f}}<extra></extra>"))
    # every estimator's name in sight: the legend in rows under the chart (beside it, 17 names need a scrollbar),
    # then the errors, at the bottom
    legend_rows, top, plot = math.ceil(len(fig.data) / 3), 80, 250
    bottom = 130 + 22 * legend_rows + 18 * len(errors)
    annotations = [dict(x=0, y=-(bottom - 4) / plot, xref="paper", yref="paper", yanchor="bottom", xanchor="left",
                        text="<br>".join(textwrap.shorten(e, 140) for e in errors), showarrow=False, align="left",
                        font=dict(size=11, color=NEGATIVE))] if errors else []
    fig.update_layout(barmode="group", title=title or "advantage per sample (mean over tokens; bars: min..max)",
                      template="plotly_white", height=top + plot + bottom, xaxis_title="sample",
                      yaxis_title="advantage", annotations=annotations, margin=dict(t=top, b=bottom),
                      legend=dict(orientation="h", yref="container", y=(18 * len(errors) + 4) / (top + plot + bottom),
                                  yanchor="bottom", x=0, xanchor="left", entrywidth=0.33, entrywidthmode="fraction"))
    return fig


def advantage_table_html(results: Mapping, batch: RolloutBatch, digits: int = 3) -> str:
    """An HTML table, one row per estimator and one column per sample: the mean advantage over tokens
    ("a..b" when the tokens of the sample differ), or the estimator's error message."""
    labels = sample_labels(batch)
    head = "".join(f"<th>{html.escape(s)}</th>" for s in labels)
    body = []
    for key, adv in results.items():
        if isinstance(adv, str):
            cells = f'<td colspan="{len(labels)}"><em>{html.escape(adv)}</em></td>'
        else:
            mean, lo, hi = token_summary(adv, batch.mask)
            cells = "".join(f"<td>{m:+.{digits}f}</td>" if abs(h - l) < 10 ** -digits
                            else f"<td>{l:+.{digits}f}..{h:+.{digits}f}</td>" for m, l, h in zip(mean, lo, hi))
        body.append(f"<tr><th>{html.escape(key)}</th>{cells}</tr>")
    # wide (one column per sample): scroll horizontally inside the book's text column instead of being cut
    return (f'<div style="overflow-x: auto"><table class="workbench-table" style="font-size: 0.85em; '
            f'white-space: nowrap"><thead><tr><th>estimator</th>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table></div>")


def panel_title(key: str, width: int = 20) -> str:
    """A registry key as a subplot title: a key longer than `width` breaks after its last "_" or "-"."""
    cut = max(key.rfind("_"), key.rfind("-"))
    return f"{key[:cut + 1]}<br>{key[cut + 1:]}" if len(key) > width and cut > 0 else key


def advantage_token_heatmaps(results: Mapping, batch: RolloutBatch, cols: int = 4) -> go.Figure:
    """One heatmap per estimator: samples x response positions, padding blank, one shared colour scale."""
    items = [(k, to_numpy(v)) for k, v in results.items() if not isinstance(v, str)]
    mask = to_numpy(batch.mask) > 0
    cols = max(1, min(cols, len(items)))
    rows = max(1, math.ceil(len(items) / cols))
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[panel_title(k) for k, _ in items] or None,
                        horizontal_spacing=0.05, vertical_spacing=min(0.12, 0.35 / rows))
    fig.update_annotations(font_size=11)  # four panels abreast: a key such as reinforce_plus_plus_baseline fits
    peak = max([float(np.nanmax(np.abs(np.where(mask, a, np.nan)))) for _, a in items] + [1e-9])
    for i, (key, a) in enumerate(items):
        fig.add_trace(go.Heatmap(z=np.where(mask, a, np.nan), coloraxis="coloraxis", hoverongaps=False,
                                 hovertemplate=f"{html.escape(key)}<br>sample %{{y}}, token %{{x}}<br>"
                                               "A %{z:+.3f}<extra></extra>"),
                      row=i // cols + 1, col=i % cols + 1)
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(title="token-level advantages (rows: samples, columns: response positions)",
                      template="plotly_white", height=max(320, 280 * rows),
                      coloraxis=dict(colorscale=WEIGHT_SCALE, cmin=-peak, cmax=peak, colorbar=dict(title="A")))
    return fig


SUCCESS_RATE_SETTINGS = (
    ("group std, Bessel", {"scale": "group", "unbiased": True}),
    ("group std, population", {"scale": "group", "unbiased": False}),
    ("batch std, Bessel", {"scale": "batch", "unbiased": True}),
    ("batch std, population", {"scale": "batch", "unbiased": False}),
    ("none (Dr.GRPO)", {"scale": "none"}),
)


def success_rate_advantages(G: int = 8, settings=SUCCESS_RATE_SETTINGS, eps: float = 1e-6) -> dict:
    """|A| of a correct and of a wrong answer in a group of G 0/1 rewards with k = 0..G correct, computed by
    the registered `grpo` on ONE batch holding a group for every k (so "batch std" is the std over them all).
    Returns {"p": [G+1], label: {"correct": [G+1], "wrong": [G+1]}} (NaN where no such answer exists)."""
    grpo = registry.get("advantage", "grpo").fn
    rewards, group = [], []
    for k in range(G + 1):
        rewards += [1.0] * k + [0.0] * (G - k)
        group += [k] * G
    batch = RolloutBatch.from_rewards(rewards, group)
    out: dict = {"p": np.arange(G + 1) / G}
    r = np.asarray(rewards).reshape(G + 1, G)
    for label, kw in settings:
        a = grpo(batch, eps=eps, **kw)[:, 0].numpy().reshape(G + 1, G)
        correct = np.array([abs(a[k][r[k] == 1][0]) if (r[k] == 1).any() else np.nan for k in range(G + 1)])
        wrong = np.array([abs(a[k][r[k] == 0][0]) if (r[k] == 0).any() else np.nan for k in range(G + 1)])
        out[label] = {"correct": correct, "wrong": wrong}
    return out


def advantage_vs_success_rate(G: int = 8, settings=SUCCESS_RATE_SETTINGS, eps: float = 1e-6) -> go.Figure:
    """|A| of a correct (left) and a wrong (right) answer against the group success rate p = k/G, for group
    std / batch std / no std division, Bessel on and off (the catalog's grpo figure)."""
    data = success_rate_advantages(G, settings, eps)
    fig = make_subplots(rows=1, cols=2, subplot_titles=("|A| of a correct answer", "|A| of a wrong answer"),
                        horizontal_spacing=0.08)
    dashes = {"Bessel": "solid", "population": "dash"}
    for i, (label, _) in enumerate(settings):
        dash = next((d for word, d in dashes.items() if word in label), "dot")
        color = RUN_COLORS[(i // 2) % len(RUN_COLORS)]
        for col, side in ((1, "correct"), (2, "wrong")):
            fig.add_trace(go.Scatter(x=data["p"], y=data[label][side], mode="lines+markers", name=label,
                                     legendgroup=label, showlegend=col == 1, line=dict(color=color, dash=dash),
                                     hovertemplate=f"{label}<br>p %{{x:.3f}}<br>|A| %{{y:.3f}}<extra></extra>"),
                          row=1, col=col)
    fig.update_xaxes(title_text=f"group success rate p = k / {G}", tickformat=".0%")
    fig.update_yaxes(title_text="|A|", rangemode="tozero", row=1, col=1)
    fig.update_layout(title=f"advantage magnitude against the success rate of a group of G = {G} (0/1 rewards)",
                      template="plotly_white", height=430)
    return fig


# ----------------------------------------------------------------------------------------------------
# Metric glossary


def metric_panels(rows: Sequence[Mapping], items: Sequence[tuple[str, str]], title: str | None = None,
                  wrap: int = 60) -> go.Figure:
    """One row per metric: its curve over the run on the left, its explanation on the right.

    rows: metric rows (dicts with "step"); items: (metric key, explanation text) pairs, "\n" starts a new
    paragraph. A metric absent from the rows gets an empty plot with "not logged in this run".
    """
    n = max(1, len(items))
    fig = make_subplots(rows=n, cols=1, vertical_spacing=min(0.08, 0.5 / n))
    annotations = []
    for i, (key, text) in enumerate(items):
        xs, ys = metric_series(list(rows), key)
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers" if len(xs) < 40 else "lines", name=key,
                                 showlegend=False, line=dict(color=RUN_COLORS[i % len(RUN_COLORS)]),
                                 marker=dict(size=4), hovertemplate=f"{html.escape(key)}<br>step %{{x}}<br>"
                                                                    "%{y:.4g}<extra></extra>"),
                      row=i + 1, col=1)
        axis = fig.layout[f"yaxis{i + 1 if i else ''}"]
        y0, y1 = axis.domain
        lines = [line for para in text.split("\n") for line in (textwrap.wrap(para, wrap) or [""])]
        body = "<br>".join(html.escape(line) for line in lines)
        if not xs:
            body = "<i>not logged in this run</i><br>" + body
        annotations.append(dict(x=0.5, y=(y0 + y1) / 2, xref="paper", yref="paper", xanchor="left",
                                yanchor="middle", align="left", showarrow=False, font=dict(size=12),
                                text=f"<b>{html.escape(key)}</b><br>{body}"))
    fig.update_xaxes(domain=[0, 0.45])
    steps = [x for key, _ in items for x in metric_series(list(rows), key)[0]]
    if steps:  # one step range for every panel, so curves logged on few steps (eval) line up
        fig.update_xaxes(range=[min(steps) - 0.5, max(steps) + 0.5])
    fig.update_xaxes(title_text="step", row=n, col=1)
    fig.update_layout(title=title, template="plotly_white", height=max(240, 190 * n + 60),
                      annotations=annotations, margin=dict(t=60 if title else 30, r=20))
    return fig


def glossary_html(entries: Sequence[tuple[str, str, str, bool]]) -> str:
    """An HTML table of (metric, what it measures, what a healthy curve looks like, logged in this run)."""
    body = "".join(
        f"<tr><td><code>{html.escape(key)}</code></td><td>{html.escape(measures)}</td>"
        f"<td>{html.escape(healthy)}</td><td>{'yes' if logged else '—'}</td></tr>"
        for key, measures, healthy, logged in entries)
    return ('<table class="workbench-table"><thead><tr><th>metric</th><th>what it measures</th>'
            "<th>a healthy curve</th><th>logged here</th></tr></thead>"
            f"<tbody>{body}</tbody></table>")
