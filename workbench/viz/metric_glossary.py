"""The metric glossary (notebook 06): one row per metric, its curve over a run beside what it means, and the glossary's
table (what a metric measures, what a healthy curve looks like, whether this run logged it).

    from workbench.viz.metric_glossary import metric_panels, glossary_html
"""
from __future__ import annotations

import html
import textwrap
from collections.abc import Mapping, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench.viz.run_curves import metric_series
from workbench.viz.style import RUN_COLORS


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
    # the column's width, whatever the longest name: columns sized here, long names wrap (inline, so JupyterLab too)
    return ('<table class="workbench-table" style="table-layout: fixed; width: 100%; overflow-wrap: anywhere">'
            '<colgroup><col style="width: 28%"><col style="width: 32%"><col style="width: 32%">'
            '<col style="width: 8%"></colgroup><thead><tr><th>metric</th><th>what it measures</th>'
            "<th>a healthy curve</th><th>logged here</th></tr></thead>"
            f"<tbody>{body}</tbody></table>")
