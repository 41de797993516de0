"""Curves of what runs logged: a run's metrics over its steps, several runs (or seeds: a mean line and a min–max band)
overlaid, the held-out evaluation before training as a first point, greedy accuracy before and after, and what a
method's own state did over a run (clip fractions per optimizer step and against staleness, BAPO's searched bounds,
R²VPO's dual variable). Pure functions: metric rows in, `go.Figure` out.

    from workbench.viz.run_curves import training_curves, seed_band_curves, with_start
"""
from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench import registry
from workbench.viz.style import NEUTRAL, POSITIVE, RUN_COLORS, is_number, title_step_axes

# Metrics the trainer logs, in the order a reader wants them: outcome first, then health signals.
DEFAULT_KEYS = (
    "reward/mean", "accuracy", "entropy", "kl", "clip/region", "response_length/mean",
    "loss/preference", "rewards/margins", "rewards/accuracies", "logps/chosen", "logps/rejected",
    "grad_norm", "loss", "time/step",
)


# ----------------------------------------------------------------------------------------------------
# Training curves


def as_runs(runs) -> dict[str, list[dict]]:
    """Normalise `runs` (a list of metric rows, or a dict name -> rows) to a dict name -> rows."""
    if isinstance(runs, Mapping):
        return {str(name): list(rows) for name, rows in runs.items()}
    return {"run": list(runs)}


def present_keys(runs: dict[str, list[dict]]) -> list[str]:
    """DEFAULT_KEYS found in any row; if none is, every numeric key except "step" (first-seen order)."""
    seen: dict[str, None] = {}
    for rows in runs.values():
        for row in rows:
            for key, value in row.items():
                if key != "step" and is_number(value):
                    seen.setdefault(key)
    preferred = [k for k in DEFAULT_KEYS if k in seen]
    return preferred or list(seen)


def metric_series(rows: list[dict], key: str) -> tuple[list, list]:
    """(steps, values) of `key`, skipping rows where it is missing, None or not finite.

    Rows without a "step" use their index, so a hand-written list of dicts still plots.
    """
    xs, ys = [], []
    for i, row in enumerate(rows):
        value = row.get(key)
        if is_number(value):
            xs.append(row.get("step", i))
            ys.append(float(value))
    return xs, ys


def band_note(groups: Mapping[str, list[list[dict]]]) -> str:
    """What the lines and bands of `seed_band_curves` are, from the number of seeds per recipe."""
    counts = {len(seeds) for seeds in groups.values()}
    if counts <= {0, 1}:
        return "one seed: each line is that run, no band"
    if len(counts) == 1:
        return f"lines: mean over {counts.pop()} seeds, bands: min–max"
    return "lines: mean over seeds, bands: min–max (no band for a recipe with one seed)"


def training_curves(runs, keys: Sequence[str] | None = None, title: str | None = None) -> go.Figure:
    """One subplot per metric, x = step; several runs are overlaid with one colour per run.

    runs: a list of metric rows (dicts with "step" and metric names), or a dict run name -> rows.
    keys: metrics to draw; default: those of DEFAULT_KEYS present in the rows.
    """
    runs = as_runs(runs)
    keys = list(keys) if keys is not None else present_keys(runs)
    if not keys:
        fig = go.Figure()
        fig.update_layout(title=title or "no metrics to plot", template="plotly_white")
        return fig
    cols = 1 if len(keys) == 1 else 2 if len(keys) <= 4 else 3
    nrows = math.ceil(len(keys) / cols)
    fig = make_subplots(rows=nrows, cols=cols, subplot_titles=keys, horizontal_spacing=0.08,
                        vertical_spacing=min(0.12, 0.5 / nrows))
    several = len(runs) > 1
    for r, (name, rows) in enumerate(runs.items()):
        color = RUN_COLORS[r % len(RUN_COLORS)]
        legend_shown = False
        for i, key in enumerate(keys):
            xs, ys = metric_series(rows, key)
            if not xs:
                continue
            fig.add_trace(go.Scatter(
                x=xs, y=ys, mode="lines+markers" if len(xs) < 30 else "lines", name=name,
                legendgroup=name, showlegend=several and not legend_shown, line=dict(color=color),
                marker=dict(size=4), hovertemplate=f"{html.escape(name)}<br>step %{{x}}<br>{key} %{{y:.4g}}"
                                                   "<extra></extra>"),
                row=i // cols + 1, col=i % cols + 1)
            legend_shown = True
    title_step_axes(fig, len(keys), cols)
    fig.update_layout(title=title, template="plotly_white", height=max(320, 260 * nrows),
                      margin=dict(t=80 if title else 50))
    return fig


def seed_band(seeds: list[list[dict]], key: str) -> tuple[list, list, list, list]:
    """Steps logged by every seed, and the mean, min and max of `key` over seeds at those steps."""
    series = [dict(zip(*metric_series(rows, key))) for rows in seeds]
    steps = sorted(set.intersection(*(set(s) for s in series))) if series else []
    values = [[s[x] for s in series] for x in steps]
    return steps, [sum(v) / len(v) for v in values], [min(v) for v in values], [max(v) for v in values]


def seed_band_curves(groups: Mapping[str, list[list[dict]]], keys: Sequence[str] | None = None,
                     title: str | None = None) -> go.Figure:
    """One subplot per metric, x = step; per recipe a mean-over-seeds line and a shaded min–max band (no band for a
    recipe with one seed: its line is that run). The min–max band of a bounded metric stays inside its range.

    groups: recipe -> list of metric-row lists (one per seed). The title (or, without one, the figure itself) says
    what lines and bands are: `band_note`; a given title gets that note under it only when a recipe has one seed.
    """
    keys = list(keys) if keys is not None else present_keys({f"{k}/{i}": rows for k, seeds in groups.items()
                                                              for i, rows in enumerate(seeds)})
    cols = 1 if len(keys) == 1 else 2 if len(keys) <= 4 else 3
    nrows = max(1, math.ceil(len(keys) / cols))
    fig = make_subplots(rows=nrows, cols=cols, subplot_titles=keys, horizontal_spacing=0.08,
                        vertical_spacing=min(0.12, 0.5 / nrows))
    for r, (name, seeds) in enumerate(groups.items()):
        color = RUN_COLORS[r % len(RUN_COLORS)]
        shown = False  # one legend entry per recipe, on the first metric it logs (not every recipe logs every key)
        for i, key in enumerate(keys):
            steps, mean, lo, hi = seed_band(seeds, key)
            if not steps:
                continue
            for trace in band_traces(steps, mean, lo, hi, name=name, color=color, banded=len(seeds) > 1,
                                     legend=not shown, opacity=0.2):
                fig.add_trace(trace, row=i // cols + 1, col=i % cols + 1)
            shown = True
    title_step_axes(fig, len(keys), cols)
    note = band_note(groups)
    if title is None:
        title = note
    elif min((len(s) for s in groups.values()), default=1) <= 1 and note not in title:
        title = f"{title}<br><sup>{note}</sup>"
    fig.update_layout(title=title, template="plotly_white", height=max(320, 260 * nrows))
    return fig


def band_traces(steps, mean, lo, hi, *, name: str, color: str, banded: bool, legend: bool, opacity: float,
                **line) -> list[go.Scatter]:
    """A recipe's mean line over seeds and, when `banded` (more than one seed), its shaded min–max band under it;
    `line`: more of the line's Scatter settings (markers, a hover template)."""
    band = go.Scatter(x=steps + steps[::-1], y=hi + lo[::-1], fill="toself", fillcolor=color, opacity=opacity,
                      line=dict(width=0), hoverinfo="skip", showlegend=False, legendgroup=name)
    mean_line = go.Scatter(x=steps, y=mean, name=name, legendgroup=name, showlegend=legend, line=dict(color=color),
                           **line)
    return [band, mean_line] if banded else [mean_line]


def with_start(groups: Mapping[str, list[list[dict]]], summaries: Sequence[Mapping]) -> dict[str, list[list[dict]]]:
    """`groups` (recipe -> metric rows per seed) with each seed's held-out evaluation before training prepended as a
    row at step -1 (eval/accuracy, eval/pass@1, eval/pass@k, eval/entropy = the summary's *_before values; the
    evaluation of row `step` s runs after s + 1 updates, so -1 is "after 0 updates"). Seed i of a recipe is matched
    to its summary by "seed" (or by order when the summaries carry none). The input is not modified."""
    out = {}
    for recipe, seeds in groups.items():
        mine = [s for s in summaries if s.get("recipe") == recipe]
        by_seed = {s.get("seed", i): s for i, s in enumerate(mine)}
        out[recipe] = []
        for i, rows in enumerate(seeds):
            s = by_seed.get(i, {})
            start = {f"eval/{key}": s.get(f"{key}_before") for key in ("accuracy", "pass@1", "pass@k", "entropy")}
            start = {k: v for k, v in start.items() if v is not None}
            out[recipe].append(([{"step": -1, **start}] if start else []) + [dict(r) for r in rows])
    return out


def accuracy_bar(summary: Mapping) -> go.Figure:
    """Greedy accuracy before and after training from a summary dict with accuracy_before / accuracy_after."""
    missing = [k for k in ("accuracy_before", "accuracy_after") if k not in summary]
    if missing:
        raise KeyError(f"summary lacks {missing}; it has {sorted(summary)}")
    values = [float(summary["accuracy_before"]), float(summary["accuracy_after"])]
    fig = go.Figure(go.Bar(x=["before", "after"], y=values, marker_color=[NEUTRAL, POSITIVE],
                           text=[f"{v:.1%}" for v in values], textposition="outside"))
    fig.update_layout(title="greedy accuracy", template="plotly_white", yaxis_title="accuracy", height=340,
                      width=420, showlegend=False)
    if all(0 <= v <= 1 for v in values):
        fig.update_yaxes(range=[0, 1.1], tickformat=".0%")
    return fig


# ----------------------------------------------------------------------------------------------------
# What a method's own state did over a run


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


def bapo_bounds_figure(rows: Sequence[Mapping], hp: Mapping | None = None) -> go.Figure:
    """Left: BAPO's searched bounds `bapo/c_low`, `bapo/c_high` per step (each step's mean over its optimizer steps),
    their start values and maxima dotted. Right: `bapo/pos_share` with the target rho0 dashed. `hp`: the run's
    objective settings over the registered defaults."""
    setting = {**registry.get("objective", "bapo").defaults, **(hp or {})}
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                        subplot_titles=("ratio bounds after the search", "positive share pos / (pos + neg)"))
    shapes = []
    for i, (key, start, top) in enumerate((("bapo/c_high", "c_high", "c_high_max"),
                                           ("bapo/c_low", "c_low", "c_low_max"))):
        xs, ys = metric_series(list(rows), key)
        color = RUN_COLORS[i]
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers", name=key, line=dict(color=color),
                                 hovertemplate=f"{key}<br>step %{{x}}<br>%{{y:.3f}}<extra></extra>"), row=1, col=1)
        for value, dash in ((setting[start], "dot"), (setting[top], "dash")):
            shapes.append(dict(type="line", x0=0, x1=1, xref="x domain", y0=value, y1=value, yref="y",
                               line=dict(color=color, dash=dash, width=1)))
    xs, ys = metric_series(list(rows), "bapo/pos_share")
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers", name="bapo/pos_share", line=dict(color=POSITIVE),
                             hovertemplate="step %{x}<br>pos_share %{y:.3f}<extra></extra>"), row=1, col=2)
    shapes.append(dict(type="line", x0=0, x1=1, xref="x2 domain", y0=setting["rho0"], y1=setting["rho0"], yref="y2",
                       line=dict(color="black", dash="dash", width=1)))
    fig.update_xaxes(title_text="step")
    fig.update_yaxes(title_text="r bound (dotted: start, dashed: max)", row=1, col=1)
    fig.update_yaxes(title_text=f"share (dashed: ρ0 = {setting['rho0']:g})", row=1, col=2)
    fig.update_layout(title="BAPO's adaptive bounds over the run", template="plotly_white", height=400,
                      shapes=shapes, legend=dict(orientation="h", y=-0.2))
    return fig


def dual_ascent_figure(runs: Mapping[str, tuple[Sequence[Mapping], float]],
                       key: str = "objective:r2vpo.lam", measured: str = "r2vpo/ratio_var") -> go.Figure:
    """Left: the dual variable a controller set per step (`key`), one line per run. Right: the measured quantity it
    reads (`measured`) with each run's budget delta dashed. runs: label -> (metric rows, delta)."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1, subplot_titles=(f"λ ({key})", f"{measured} vs δ"))
    shapes = []
    for i, (label, (rows, delta)) in enumerate(runs.items()):
        color = RUN_COLORS[i % len(RUN_COLORS)]
        for col, k in ((1, key), (2, measured)):
            xs, ys = metric_series(list(rows), k)
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers", name=label, legendgroup=label,
                                     showlegend=col == 1, line=dict(color=color),
                                     hovertemplate=f"{html.escape(label)}<br>step %{{x}}<br>%{{y:.4g}}<extra></extra>"),
                          row=1, col=col)
        shapes.append(dict(type="line", x0=0, x1=1, xref="x2 domain", y0=delta, y1=delta, yref="y2",
                           line=dict(color=color, dash="dash", width=1)))
    fig.update_xaxes(title_text="step")
    fig.update_yaxes(rangemode="tozero")
    fig.update_layout(title="R²VPO's dual ascent: λ rises while the ratio variance exceeds δ, decays otherwise",
                      template="plotly_white", height=400, shapes=shapes, legend=dict(orientation="h", y=-0.2))
    return fig
