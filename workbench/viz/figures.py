"""Plotly figures of training runs, objectives and advantages. Pure functions: data in, `go.Figure` out.

Every quantity drawn from the library's math (surrogate curves, advantages) is computed by calling the
registered component itself, so a figure can never disagree with the code that trains.
"""
from __future__ import annotations

import html
import math
import textwrap
from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from workbench import registry
from workbench.batch import RolloutBatch

# Metrics the trainer logs, in the order a reader wants them: outcome first, then health signals.
DEFAULT_KEYS = (
    "reward/mean", "accuracy", "entropy", "kl", "clip/region", "response_length/mean",
    "loss/preference", "rewards/margins", "rewards/accuracies", "logps/chosen", "logps/rejected",
    "grad_norm", "loss", "time/step",
)
# One colour per run or recipe for up to 24 of them: plotly's ten first (the figures' usual look), then fourteen
# darker ones from Dark24 chosen to stay apart from those ten (a comparison of 8-12 recipes never reuses a colour).
PLOTLY_MIME = "application/vnd.plotly.v1+json"  # how a notebook stores a plotly figure
RUN_COLORS = list(qualitative.Plotly) + ["#222A2A", "#B68100", "#750D86", "#1616A7", "#862A16", "#1CA71C", "#778AAE",
                                         "#6C7C32", "#AF0038", "#B2828D", "#0D2A63", "#6C4516", "#FB0D0D", "#DA16FF"]
POSITIVE, NEGATIVE, NEUTRAL = "#1f77b4", "#d62728", "#7f7f7f"


# ----------------------------------------------------------------------------------------------------
# Training curves


def as_runs(runs) -> dict[str, list[dict]]:
    """Normalise `runs` (a list of metric rows, or a dict name -> rows) to a dict name -> rows."""
    if isinstance(runs, Mapping):
        return {str(name): list(rows) for name, rows in runs.items()}
    return {"run": list(runs)}


def is_number(value) -> bool:
    return isinstance(value, (int, float, np.number)) and not isinstance(value, bool) and math.isfinite(value)


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
            where = dict(row=i // cols + 1, col=i % cols + 1)
            if len(seeds) > 1:
                fig.add_trace(go.Scatter(x=steps + steps[::-1], y=hi + lo[::-1], fill="toself", fillcolor=color,
                                         opacity=0.2, line=dict(width=0), hoverinfo="skip", showlegend=False,
                                         legendgroup=name), **where)
            fig.add_trace(go.Scatter(x=steps, y=mean, name=name, legendgroup=name, showlegend=not shown,
                                     line=dict(color=color)), **where)
            shown = True
    title_step_axes(fig, len(keys), cols)
    note = band_note(groups)
    if title is None:
        title = note
    elif min((len(s) for s in groups.values()), default=1) <= 1 and note not in title:
        title = f"{title}<br><sup>{note}</sup>"
    fig.update_layout(title=title, template="plotly_white", height=max(320, 260 * nrows))
    return fig


# ----------------------------------------------------------------------------------------------------
# Surrogate objective and its gradient weight


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


# ----------------------------------------------------------------------------------------------------
# Group advantages


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
# Token entropy


def to_numpy(x) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=np.float64)


def display_token(token: str) -> str:
    # Plotly renders cell text as HTML-like markup, so "<" must be escaped; whitespace made visible.
    return html.escape(str(token).replace("\n", "↵").replace("\t", "⇥"))


def entropy_heatmap(tokens: Sequence[Sequence[str]], entropy, mask=None, title: str | None = None) -> go.Figure:
    """Per-token entropy as a heatmap with each token's text in its cell.

    tokens: B rows of token strings (rows may be shorter than T); entropy: [B, T] tensor or array;
    mask: optional [B, T], cells where it is 0 (and cells past a row's tokens) are left blank.
    """
    z = to_numpy(entropy)
    if z.ndim != 2:
        raise ValueError(f"entropy must be [B, T], got shape {z.shape}")
    B, T = z.shape
    if len(tokens) != B:
        raise ValueError(f"tokens has {len(tokens)} rows but entropy has {B}")
    valid = np.ones((B, T), dtype=bool) if mask is None else to_numpy(mask) > 0
    if valid.shape != (B, T):
        raise ValueError(f"mask has shape {valid.shape} but entropy has {(B, T)}")
    text = [[display_token(row[t]) if t < len(row) else "" for t in range(T)] for row in tokens]
    for b in range(B):
        valid[b, len(tokens[b]):] = False
    z = np.where(valid, z, np.nan)
    text = [[cell if valid[b, t] else "" for t, cell in enumerate(row)] for b, row in enumerate(text)]
    fig = go.Figure(go.Heatmap(
        z=z, text=text, texttemplate="%{text}", textfont=dict(size=11), colorscale="Viridis",
        colorbar=dict(title="entropy (nats)"), hoverongaps=False, x=list(range(T)), y=list(range(B)),
        hovertemplate="row %{y}, position %{x}<br>token %{text}<br>H = %{z:.3f}<extra></extra>"))
    fig.update_yaxes(autorange="reversed", title_text="sequence")
    fig.update_xaxes(title_text="response position")
    fig.update_layout(title=title or "token entropy", template="plotly_white",
                      height=max(250, 40 * B + 140), width=max(500, 56 * T + 160))
    return fig


# ----------------------------------------------------------------------------------------------------
# Evaluation


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
