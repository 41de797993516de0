"""Figures for credit assignment against the exact answer (notebook 13): every estimator's per-turn advantage on the
same sampled episodes beside the exact advantage, each estimator's bias and variance, and each trained method's
held-out curve against GRPO's (one panel per method, from the stored runs).

    from workbench.advantages import exact as ce
    from workbench.viz.credit_comparisons import turn_grid, advantage_heatmaps, bias_variance_figure

Pure functions: episodes, estimators and rows in, `go.Figure` out; `turn_grid` is public so a notebook or a test
prints the numbers a heatmap draws.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench import registry
from workbench.advantages import exact as ce
from workbench.viz.run_curves import seed_band
from workbench.viz.style import RUN_COLORS, SIGNED_SCALE

COLORS = RUN_COLORS[:10]  # plotly's ten hues: the darker extras read as the grey baseline


def turn_grid(mdp: ce.EpisodeMDP, policy: dict, episodes: list, estimator: ce.Estimator | None,
              exact: ce.Exact) -> list[list[float]]:
    """[episode][turn] advantages of `estimator` on one group of `episodes` (None: the exact A(h_t, a_t)); NaN past an
    episode's last turn."""
    S = max(len(e.actions) for e in episodes)
    if estimator is None:
        rows = [[exact.advantage(tuple(e.actions[:s]), a) for s, a in enumerate(e.actions)] for e in episodes]
    else:
        batch = ce.episode_batch(mdp, episodes, len(episodes), policy, exact.V if estimator.critic else None)
        rows = ce.turn_advantages(registry.get("advantage", estimator.key).fn(batch, **estimator.kw), batch)
    return [row + [math.nan] * (S - len(row)) for row in rows]


def episode_labels(mdp: ce.EpisodeMDP, episodes: list) -> list[str]:
    """One label per episode: its actions and its return, e.g. "KRRRO → 1"."""
    return [f"{''.join(mdp.actions[a] for a in e.actions)} → {sum(e.rewards):g}" for e in episodes]


def _heatmap(grid, labels, actions, zmax, showscale):
    S = len(grid[0])
    return go.Heatmap(z=grid, x=[f"turn {s}" for s in range(S)], y=labels, text=actions, texttemplate="%{text}",
                      colorscale=SIGNED_SCALE, zmid=0, zmin=-zmax, zmax=zmax, showscale=showscale,
                      colorbar=dict(title="A", len=0.9), hovertemplate="%{y}<br>%{x}: A = %{z:.3f}<extra></extra>")


def advantage_heatmaps(mdp: ce.EpisodeMDP, policy: dict, episodes: list, estimator: ce.Estimator,
                       exact: ce.Exact | None = None) -> go.Figure:
    """Two heatmaps over (episode, turn) of one group: the exact advantage A(h_t, a_t) and `estimator`'s, on one
    colour scale; each cell shows the action taken."""
    exact = exact or ce.exact_values(mdp, policy)
    grids = [turn_grid(mdp, policy, episodes, None, exact), turn_grid(mdp, policy, episodes, estimator, exact)]
    finite = [abs(v) for g in grids for row in g for v in row if not math.isnan(v)]
    zmax = max(max(finite, default=1.0), 1e-6)
    labels = episode_labels(mdp, episodes)
    S = len(grids[0][0])
    actions = [[mdp.actions[a] for a in e.actions] + [""] * (S - len(e.actions)) for e in episodes]
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.04,
                        subplot_titles=("exact A(h, a)", f"{estimator.label}"))
    for col, grid in enumerate(grids, start=1):
        fig.add_trace(_heatmap(grid, labels, actions, zmax, showscale=col == 2), row=1, col=col)
    fig.update_yaxes(autorange="reversed", title_text="episode (actions → return)", row=1, col=1)
    fig.update_layout(height=120 + 26 * len(episodes), margin=dict(l=10, r=10, t=60, b=30),
                      title=dict(text=f"Per-turn advantages on one group of {mdp.name}", y=0.98))
    return fig


def bias_variance_figure(rows: Sequence[dict], title: str | None = None) -> go.Figure:
    """Each estimator's visit-weighted |bias| and spread (the square root of its variance) of the per-turn advantage
    against the exact advantage, as horizontal bars, best (lowest MSE) at the top; shorter is better."""
    ranked = sorted(rows, key=lambda r: r["mse"], reverse=True)  # plotly draws the first category at the bottom
    names = [r["estimator"] for r in ranked]
    fig = go.Figure()
    for label, values, color in (("|bias|", [r["abs_bias"] for r in ranked], "#d62728"),
                                 ("spread = √variance", [math.sqrt(r["variance"]) for r in ranked], "#1f77b4")):
        fig.add_trace(go.Bar(y=names, x=values, name=label, orientation="h", marker_color=color,
                             hovertemplate="%{y}<br>" + label + " %{x:.4f}<extra></extra>"))
    fig.update_layout(barmode="group", height=140 + 34 * len(rows), margin=dict(l=10, r=10, t=60, b=40),
                      legend=dict(orientation="h", y=1.02, x=1, xanchor="right", yanchor="bottom"),
                      title=dict(text=title or "Error of each estimator against the exact advantage", y=0.98))
    fig.update_xaxes(title_text="per (history, action), averaged over visits; shorter is better")
    return fig


def mean_at(seeds: list[list[dict]], key: str, steps: Sequence[int]) -> list[float]:
    """The mean over seeds of `key` at each of `steps` (0 where a seed's row lacks it)."""
    by_step = [{r["step"]: r.get(key) or 0.0 for r in rows} for rows in seeds]
    return [sum(s.get(x, 0.0) for s in by_step) / len(by_step) for x in steps]


def table_rows(rows: Sequence[dict]) -> list[dict]:
    """The rows rounded for a table: estimator, |bias|, variance, MSE, correlation, note."""
    return [{"estimator": r["estimator"], "|bias|": round(r["abs_bias"], 4), "variance": round(r["variance"], 4),
             "MSE": round(r["mse"], 4), "corr": round(r["corr"], 3), "what it is": r["note"]} for r in rows]


def against_baseline_grid(groups: Mapping[str, list[list[dict]]], key: str = "eval/pass@1", baseline: str = "grpo",
                          title: str | None = None, cols: int = 4, x_key: str | None = None) -> go.Figure:
    """One small panel per method: its mean-over-seeds `key` (line) and min–max band against the baseline's (grey),
    on one shared y scale, so each method is read against the same reference. `groups` as `seed_band_curves`.
    x: the step, or with `x_key` the mean over seeds of that metric at the step (e.g. rollouts spent so far; 0 where
    a row lacks it, as the warm start's row at step -1)."""
    methods = [m for m in groups if m != baseline]
    rows = max(1, math.ceil(len(methods) / cols))
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=methods, shared_yaxes=True, shared_xaxes=True,
                        horizontal_spacing=0.03, vertical_spacing=min(0.12, 0.6 / rows))
    for i, method in enumerate(methods):
        where = dict(row=i // cols + 1, col=i % cols + 1)
        for name, color in ((baseline, "#9e9e9e"), (method, COLORS[i % len(COLORS)])):
            steps, mean, lo, hi = seed_band(groups.get(name, []), key)
            if not steps:
                continue
            xs = steps if x_key is None else mean_at(groups[name], x_key, steps)
            fig.add_trace(go.Scatter(x=xs + xs[::-1], y=hi + lo[::-1], fill="toself", fillcolor=color,
                                     opacity=0.2, mode="lines", line=dict(width=0), hoverinfo="skip"), **where)
            fig.add_trace(go.Scatter(x=xs, y=mean, name=name, line=dict(color=color), mode="lines+markers",
                                     marker=dict(size=4),
                                     hovertemplate=f"{name}<br>{x_key or 'step'} %{{x}}<br>{key} %{{y:.3f}}"
                                                   "<extra></extra>"),
                          **where)
    for col in range(1, cols + 1):
        fig.update_xaxes(title_text=x_key or "step", row=rows, col=col)
    fig.update_yaxes(title_text=key, col=1)
    fig.update_layout(template="plotly_white", height=110 + 200 * rows, showlegend=False,
                      margin=dict(l=10, r=10, t=100, b=40),
                      title=title or f"{key} against {baseline} (grey)<br><sup>colour: the method; lines: mean over "
                                     f"seeds, bands: min–max</sup>")
    return fig
