"""Advantage estimators side by side: GRPO against RLOO on one set of rewards (notebook 01), every registered estimator
on one batch as bars, a table and token heatmaps (notebook 05), |A| of a right and a wrong answer against the group's
success rate (the catalog's grpo figure), and GUI-Libra's scale on a negative advantage (notebook 10). Every
advantage is computed by the registered estimator itself.

    from workbench.viz.advantage_comparisons import advantage_bars, advantage_comparison, advantage_vs_success_rate
"""
from __future__ import annotations

import html
import math
import textwrap
from collections.abc import Mapping

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from workbench import registry
from workbench.batch import RolloutBatch
from workbench.viz.style import NEGATIVE, NEUTRAL, POSITIVE, RUN_COLORS, SIGNED_SCALE, to_numpy


# ----------------------------------------------------------------------------------------------------
# GRPO against RLOO on one set of rewards


def group_advantages(rewards, group=None, **grpo_kw) -> dict[str, np.ndarray]:
    """{"grpo": [B], "rloo": [B]} per-sample advantages from the registered estimators (may raise ValueError)."""
    batch = RolloutBatch.from_rewards(rewards, group)
    grpo = registry.get("advantage", "grpo").fn
    rloo = registry.get("advantage", "rloo").fn
    rloo_kw = {k: v for k, v in grpo_kw.items() if k == "allow_singletons"}
    return {"grpo": grpo(batch, **grpo_kw)[:, 0].numpy(), "rloo": rloo(batch, **rloo_kw)[:, 0].numpy()}


def advantage_bars(rewards, group=None, **grpo_kw) -> go.Figure:
    """Bars of the reward, the GRPO advantage and the RLOO advantage of each sample, side by side.

    rewards: [B] outcome rewards; group: [B] prompt ids (default: one group); grpo_kw go to `grpo`.
    A group of one has no baseline: the error message becomes the title and the advantage bars are blank.
    """
    rewards_np = torch.as_tensor(rewards, dtype=torch.float64).flatten().numpy()
    group_np = np.zeros(len(rewards_np), dtype=int) if group is None else np.asarray(group).flatten()
    one_group = len(set(group_np.tolist())) == 1
    labels = [f"{i}" if one_group else f"{i} (g{g})" for i, g in enumerate(group_np)]
    try:
        adv = group_advantages(rewards_np, group_np, **grpo_kw)
        title = "GRPO vs RLOO advantages" + (f" ({', '.join(f'{k}={v}' for k, v in grpo_kw.items())})"
                                             if grpo_kw else "")
    except ValueError as err:
        adv = {"grpo": [None] * len(rewards_np), "rloo": [None] * len(rewards_np)}
        title = "<br>".join(textwrap.wrap(str(err), 90))
    fig = go.Figure([
        go.Bar(x=labels, y=rewards_np, name="reward R", marker_color=NEUTRAL),
        go.Bar(x=labels, y=adv["grpo"], name="GRPO A", marker_color=POSITIVE),
        go.Bar(x=labels, y=adv["rloo"], name="RLOO A", marker_color="#ff7f0e"),
    ])
    fig.update_layout(barmode="group", title=dict(text=title, font=dict(size=14)), template="plotly_white",
                      xaxis_title="sample", yaxis_title="value", height=380)
    return fig


# ----------------------------------------------------------------------------------------------------
# Every estimator on one batch


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
                      coloraxis=dict(colorscale=SIGNED_SCALE, cmin=-peak, cmax=peak, colorbar=dict(title="A")))
    return fig


# ----------------------------------------------------------------------------------------------------
# Against the group's success rate


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


def success_scale_figure(G: int = 8, settings=((0.5, 1.5), (0.0, 1.0), (1.0, 0.0))) -> go.Figure:
    """The factor GUI-Libra puts on a negative advantage against the group's success rate k/G, one line per
    (base, coef), computed by `workbench.advantages.gui_libra.success_scale` on a group of G answers, k right."""
    from workbench.advantages.gui_libra import success_scale

    fig = go.Figure()
    rates = np.arange(G + 1) / G
    for i, (base, coef) in enumerate(settings):
        scale = [float(success_scale(torch.tensor([1.0] * k + [0.0] * (G - k), dtype=torch.float64),
                                     torch.zeros(G, dtype=torch.long), base=base, coef=coef)[0]) for k in range(G + 1)]
        label = f"base {base:g}, coef {coef:g}" + (" (GUI-Libra)" if (base, coef) == (0.5, 1.5) else "")
        fig.add_trace(go.Scatter(x=rates, y=scale, mode="lines+markers", name=label,
                                 line=dict(color=RUN_COLORS[i % len(RUN_COLORS)], dash="solid" if i == 0 else "dot")))
    fig.update_layout(title="GUI-Libra: the weight of a negative advantage against the group's success rate"
                            "<br><sup>positive advantages keep 1</sup>",
                      xaxis_title=f"group success rate k/{G}", yaxis_title="scale on A < 0", yaxis_range=[-0.05, 1.05],
                      template="plotly_white", height=360, legend=dict(orientation="h", y=-0.25))
    return fig
