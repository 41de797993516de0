"""Figures for data selection and replay (notebook 15): a prompt pool's pass rates over training, a replay buffer's
age and reward mix over steps, and which traces Resample-on-Correct keeps of each group.

    from workbench.train.inspection import inspect_run
    from workbench.viz.data_figures import pass_rate_grid, pass_rate_heatmap, buffer_mix, buffer_mix_figure

Pure functions: `inspect_run` views (or a batch's rewards and groups) in, numbers or a `go.Figure` out; the grid
functions are public so a test or a notebook prints what a figure draws.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

AGE_BINS = (0, 5, 10, 20, 40)   # a buffer row's age in steps: 0-4, 5-9, 10-19, 20-39, 40+
AGE_COLORS = ("#08306b", "#2171b5", "#6baed6", "#c6dbef", "#f0f0f0")


def pass_rate_grid(pool: dict, steps: int | None = None, order: Sequence[int] | None = None) \
        -> tuple[list[int], list[int], list[list[float]]]:
    """(prompt ids, steps, [prompt][step] pass rate, NaN where the prompt was not trained on) of a pool view
    (`inspect_run(...)["components"]["sampler:<key>"]`). Prompts in `order`, else by mean pass rate, highest first
    (prompts never trained on last)."""
    rates = {p["id"]: dict((int(s), float(r)) for s, r in p["pass_rates"]) for p in pool["prompts"]}
    last = steps if steps is not None else max((s for r in rates.values() for s in r), default=-1) + 1
    if order is None:
        order = sorted(rates, key=lambda i: (not rates[i], -sum(rates[i].values()) / max(1, len(rates[i])), i))
    grid = [[rates[i].get(s, math.nan) for s in range(last)] for i in order]
    return list(order), list(range(last)), grid


def pass_rate_heatmap(pool: dict, title: str = "", labels: dict | None = None, order: Sequence[int] | None = None,
                      height: int = 520) -> go.Figure:
    """Prompts (rows) x steps (columns): the pass rate of the prompt's group at each step it was sampled (blank
    otherwise). `labels` {id: short text} names rows (e.g. the countdown size); hover shows the prompt."""
    ids, steps, grid = pass_rate_grid(pool, order=order)
    text = {p["id"]: p["prompt"] for p in pool["prompts"]}
    names = [f"{(labels or {}).get(i, '')} #{i}".strip() for i in ids]
    hover = [[f"prompt #{i}: {text[i][:60]!r}<br>step {s}<br>pass rate %{{z:.2f}}" for s in steps] for i in ids]
    fig = go.Figure(go.Heatmap(z=grid, x=steps, y=names, colorscale="Viridis", zmin=0, zmax=1, hoverongaps=False,
                               customdata=hover, hovertemplate="%{customdata}<extra></extra>",
                               colorbar=dict(title="pass rate")))
    fig.update_yaxes(autorange="reversed", title="prompt of the pool", tickfont=dict(size=9))
    fig.update_xaxes(title="step")
    fig.update_layout(template="plotly_white", height=height, title=title, margin=dict(l=10, r=10, t=80, b=40))
    return fig


def age_bin(age: int) -> int:
    """Index of `age` in AGE_BINS (the last bin is open)."""
    return max(i for i, lo in enumerate(AGE_BINS) if age >= lo)


def bin_names() -> list[str]:
    return [f"{lo}-{hi - 1}" for lo, hi in zip(AGE_BINS, AGE_BINS[1:])] + [f"{AGE_BINS[-1]}+"]


def buffer_mix(snapshots: Sequence[tuple[int, dict]]) -> dict:
    """Per snapshot (step, buffer view from `inspect_run`): rows per age bin, mean reward, share of rows with reward
    > 0 and distinct prompts. Returns {"steps", "ages": [bin][snapshot] counts, "mean_reward", "success", "prompts"}."""
    out = {"steps": [s for s, _ in snapshots], "ages": [[0] * len(snapshots) for _ in AGE_BINS],
           "mean_reward": [], "success": [], "prompts": []}
    for j, (_, view) in enumerate(snapshots):
        entries = view["entries"]
        for e in entries:
            out["ages"][age_bin(e["age"])][j] += 1
        rewards = [e["reward"] for e in entries]
        out["mean_reward"].append(sum(rewards) / len(rewards) if rewards else math.nan)
        out["success"].append(sum(r > 0 for r in rewards) / len(rewards) if rewards else math.nan)
        out["prompts"].append(view["prompts"])
    return out


def buffer_mix_figure(snapshots: Sequence[tuple[int, dict]], title: str = "") -> go.Figure:
    """Top: the buffer's rows at each kept checkpoint, stacked by age (dark: added in the last steps); bottom: their
    mean reward and the share with reward > 0."""
    mix = buffer_mix(snapshots)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.65, 0.35], vertical_spacing=0.08,
                        subplot_titles=("rows held, by age (steps since added)", "what they hold"))
    for counts, name, color in zip(mix["ages"], bin_names(), AGE_COLORS):
        bar = dict(color=color, line=dict(color="#888", width=0.5))
        fig.add_trace(go.Bar(x=mix["steps"], y=counts, name=f"age {name}", marker=bar,
                             hovertemplate=f"step %{{x}}<br>age {name}: %{{y}} rows<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Scatter(x=mix["steps"], y=mix["mean_reward"], name="mean reward", mode="lines+markers",
                             line=dict(color="#d62728")), row=2, col=1)
    fig.add_trace(go.Scatter(x=mix["steps"], y=mix["success"], name="share with reward > 0", mode="lines+markers",
                             line=dict(color="#2ca02c", dash="dot")), row=2, col=1)
    fig.update_layout(barmode="stack", template="plotly_white", height=520, title=title,
                      margin=dict(l=10, r=10, t=90, b=40))
    fig.update_xaxes(title_text="step of the checkpoint", row=2, col=1)
    fig.update_yaxes(title_text="rows", row=1, col=1)
    fig.update_yaxes(range=[0, 1.05], row=2, col=1)
    return fig


def roc_grid(rewards: torch.Tensor, group: torch.Tensor, penalty: torch.Tensor, kept: Sequence[int]) -> list[dict]:
    """One dict per group (in group order): its rewards, penalties, which of its rows RoC kept, and whether its
    rewards differ (a group of equal rewards is dropped whole)."""
    kept = set(int(i) for i in kept)
    out = []
    for g in torch.unique(group).tolist():
        rows = torch.nonzero(group == g).flatten().tolist()
        r = [float(rewards[i]) for i in rows]
        out.append({"group": g, "rewards": r, "penalty": [float(penalty[i]) for i in rows],
                    "kept": [i in kept for i in rows], "informative": len(set(r)) > 1})
    return out


def roc_figure(groups: list[dict], title: str = "") -> go.Figure:
    """Each group a row of its n traces (rollout order): green correct, red wrong; filled = kept, hollow = dropped;
    a grey row is a group of equal rewards, dropped whole. Hover: reward and penalty p_err + p_format."""
    fig = go.Figure()
    for sign, color, name in ((True, "#2ca02c", "correct (R > 0)"), (False, "#d62728", "wrong")):
        for kept, symbol, label in ((True, "circle", "kept"), (False, "circle-open", "dropped")):
            xs, ys, hover = [], [], []
            for y, g in enumerate(groups):
                for x, (r, p, k) in enumerate(zip(g["rewards"], g["penalty"], g["kept"])):
                    if (r > 0) == sign and k == kept:
                        xs.append(x)
                        ys.append(y)
                        hover.append(f"group {g['group']}, trace {x}<br>reward {r:g}, penalty {p:.2f}<br>{label}"
                                     + ("" if g["informative"] else " (all rewards equal)"))
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="markers", name=f"{name}, {label}", customdata=hover,
                                     hovertemplate="%{customdata}<extra></extra>",
                                     marker=dict(symbol=symbol, size=11, color=color, line=dict(width=1.5))))
    for y, g in enumerate(groups):
        if not g["informative"]:
            fig.add_shape(type="rect", x0=-0.5, x1=len(g["rewards"]) - 0.5, y0=y - 0.4, y1=y + 0.4,
                          fillcolor="#bdbdbd", opacity=0.35, line=dict(width=0), layer="below")
    fig.update_yaxes(title="group (prompt)", tickvals=list(range(len(groups))),
                     ticktext=[str(g["group"]) for g in groups], autorange="reversed")
    fig.update_xaxes(title="trace, in rollout order", dtick=1)
    fig.update_layout(template="plotly_white", height=max(320, 120 + 34 * len(groups)), title=title,
                      margin=dict(l=10, r=10, t=80, b=40))
    return fig


def efficiency_rows(groups: dict, summaries: Sequence[dict], baseline: str = "grpo") -> list[dict]:
    """Per recipe of a stored comparison (mean ± std over seeds where it says so): held-out accuracy after, rows
    sampled in all (`rollouts/total` at the last step), accuracy gained per 1,000 rollouts over the warm start, the
    share of groups without reward spread (mean over stored steps) and seconds per step (mean; wall-clock of runs
    that shared the machine with others, a rough guide only). The baseline first."""
    def mean_std(xs):
        xs = [x for x in xs if x is not None and not math.isnan(x)]
        if not xs:
            return math.nan, math.nan
        m = sum(xs) / len(xs)
        return m, (sum((x - m) ** 2 for x in xs) / max(1, len(xs) - 1)) ** 0.5

    def of_rows(seeds, key):
        return [sum(r[key] for r in rows if r.get(key) is not None) / max(1, sum(r.get(key) is not None for r in rows))
                for rows in seeds if any(r.get(key) is not None for r in rows)]

    out = []
    for recipe in sorted(groups, key=lambda r: (r != baseline, list(groups).index(r))):
        seeds = groups[recipe]
        mine = [s for s in summaries if s["recipe"] == recipe]
        after, sd = mean_std([s["accuracy_after"] for s in mine])
        gain = mean_std([s["accuracy_after"] - s["accuracy_before"] for s in mine])[0]
        total = mean_std([rows[-1].get("rollouts/total") for rows in seeds if rows])[0]
        out.append({"recipe": recipe, "accuracy after": f"{after:.3f} ± {sd:.3f}",
                    "rollouts": round(total) if not math.isnan(total) else None,
                    "gain / 1k rollouts": round(1000 * gain / total, 4) if total and not math.isnan(total) else None,
                    "groups without spread": round(mean_std(of_rows(seeds, "frac_zero_std_groups"))[0], 3),
                    "s / step": round(mean_std(of_rows(seeds, "time/step"))[0], 2)})
    return out
