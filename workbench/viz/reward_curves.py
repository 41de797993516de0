"""Figures for the reward-design notebook (12_reward_design): how the reward stage combines several rewards, the
length rewards against the response length, a reward that can be gamed and CGPO's judges, the per-reward curves of
a multi-reward run, and one small picture per process reward (CM2's checklist, SRPO, ReflexiCoder, SPEAR,
RetroAgent, SSL, FAPO).

Pure functions (data in, `go.Figure` or text out), except the two explorers (`aggregation_explorer`,
`length_explorer`), which wrap a figure in ipywidgets as `workbench.viz.entropy_controls.entropy_explorer` does. Every
number comes from the library's own code: the registered reward functions (`registry.get("reward", key).fn`,
called with `completion_ids` of the lengths drawn and a `scores` column), `workbench.rewards.aggregate.combine`,
the `grpo` advantage, the `cgpo` reward shaping, and the public functions of `workbench.rewards.arlcp`,
`checklist`, `reflection`, `tools`, `retroagent`, `ssl` and `fapo`.

    from workbench.viz.reward_curves import aggregation_explorer, length_explorer, checklist_grid_figure
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from workbench import registry
from workbench.advantages.group import grpo
from workbench.batch import RolloutBatch
from workbench.recipes import get_recipe
from workbench.rewards import aggregate
from workbench.train.glossary import PER_REWARD
from workbench.viz.run_curves import metric_series
from workbench.viz.style import NEGATIVE, NEUTRAL, POSITIVE, RUN_COLORS
from workbench.viz.tables import before_after_rows
from workbench.viz.widgets import explorer, slider

MODES = aggregate.AGGREGATIONS  # ("sum_then_normalize", "normalize_then_sum")
MODE_COLORS = {"sum_then_normalize": "#ff7f0e", "normalize_then_sum": "#2ca02c"}
BUFFER_COLOR = "#ff7f0e"


def reward_fn(key: str):
    """The registered reward function `key` (kind "reward")."""
    return registry.get("reward", key).fn


def fake_completions(lengths: Sequence[int]) -> tuple[list[str], list[list[int]]]:
    """(completions, completion_ids) of the given token lengths: what a length reward reads (its |y| is
    len(completion_ids[i])); the texts are placeholders."""
    lengths = [int(n) for n in lengths]
    if any(n < 0 for n in lengths):
        raise ValueError(f"lengths must be >= 0, got {lengths}")
    return ["x" * n for n in lengths], [[0] * n for n in lengths]


# ----------------------------------------------------------------------------------------------------
# 1. How the reward stage combines rewards


AGG_CORRECT = (1, 0, 0, 1, 0, 0, 0, 1)          # one group of 8: the verifier's 0/1
AGG_LENGTHS = (5, 8, 4, 6, 10, 7, 9, 5)          # tokens of each answer (budget 10): the right ones are short
AGG_BUDGET = 10


def length_proxy(lengths: Sequence[int], max_len: int = AGG_BUDGET) -> np.ndarray:
    """The registered `length-bias` reward |y| / L of answers of these lengths: a reward that pays length."""
    completions, ids = fake_completions(lengths)
    return np.array(reward_fn("length-bias")(completions, completion_ids=ids, max_len=max_len), dtype=float)


def combined_rewards(values, weights, mode: str, group=None) -> torch.Tensor:
    """R [B] of `aggregate.combine` (the reward stage's aggregation) for values [B, K] (NaN: not applicable),
    weights [K], one group unless `group` [B] is given."""
    values = torch.as_tensor(np.asarray(values, dtype=float), dtype=torch.float64)
    group = torch.zeros(values.shape[0], dtype=torch.long) if group is None else torch.as_tensor(group).long()
    rewards, _ = aggregate.combine(values, torch.as_tensor(np.asarray(weights, dtype=float)), group, mode)
    return rewards


def grpo_advantages(rewards, group=None) -> np.ndarray:
    """The registered `grpo` advantage (defaults: group std, Bessel) of outcome rewards [B], one per answer."""
    batch = RolloutBatch.from_rewards(rewards, group=group)
    return grpo(batch)[:, 0].double().numpy()


def aggregation_advantages(scale: float = 10.0, weight: float = 0.5, correct=AGG_CORRECT, lengths=AGG_LENGTHS,
                           max_len: int = AGG_BUDGET, task_weight: float = 1.0) -> dict:
    """One group, two rewards: the verifier's correctness (weight `task_weight`) and `scale` x the `length-bias`
    reward (weight `weight`), combined by each aggregation, then GRPO. Returns {"correct", "lengths", "values"
    [B, 2], "weights", and per mode: {"rewards", "advantages", "dominant" (every right answer's advantage above
    every wrong one's), "correct_mean" (mean advantage of the right answers)}}."""
    correct = np.asarray(correct, dtype=float)
    if len(correct) != len(lengths):
        raise ValueError(f"correct and lengths disagree: {len(correct)} vs {len(lengths)}")
    values = np.stack([correct, scale * length_proxy(lengths, max_len)], axis=1)
    weights = np.array([task_weight, weight])
    out = {"correct": correct.astype(bool), "lengths": np.asarray(lengths), "values": values, "weights": weights,
           "scale": scale, "weight": weight}
    for mode in MODES:
        rewards = combined_rewards(values, weights, mode)
        adv = grpo_advantages(rewards)
        right, wrong = adv[out["correct"]], adv[~out["correct"]]
        out[mode] = {"rewards": rewards.numpy(), "advantages": adv,
                     "dominant": bool(len(right) and len(wrong) and right.min() > wrong.max()),
                     "correct_mean": float(right.mean()) if len(right) else float("nan")}
    return out


def aggregation_sweep(scales=None, weight: float = 0.5, **kw) -> dict:
    """Mean advantage of the right answers against the proxy's scale, per mode: {"scale", mode: array}."""
    scales = np.geomspace(0.1, 100.0, 61) if scales is None else np.asarray(scales, dtype=float)
    out = {"scale": scales}
    for mode in MODES:
        out[mode] = np.array([aggregation_advantages(s, weight, **kw)[mode]["correct_mean"] for s in scales])
    return out


def aggregation_figure(scale: float = 10.0, weight: float = 0.5, **kw) -> go.Figure:
    """Left, middle: each answer's GRPO advantage under sum_then_normalize and normalize_then_sum (blue: right,
    red: wrong; x: its length). Right: the right answers' mean advantage against the proxy's scale, both modes, the
    current scale marked. A fixed set of traces, so a widget redraws it in place."""
    d = aggregation_advantages(scale, weight, **kw)
    sweep = aggregation_sweep(weight=weight, **kw)
    labels = [f"{i}: {n} tok" for i, n in enumerate(d["lengths"])]
    colors = [POSITIVE if c else NEGATIVE for c in d["correct"]]
    titles = [f"{mode}:<br>{'right answers on top' if d[mode]['dominant'] else 'correctness drowned'}"
              for mode in MODES] + ["right answers' mean A<br>against the scale"]
    fig = make_subplots(rows=1, cols=3, column_widths=[0.32, 0.32, 0.36], horizontal_spacing=0.1,
                        subplot_titles=titles)
    fig.update_annotations(font_size=13)  # two-line panel titles, each within its panel
    custom = np.stack([d["values"][:, 0], d["values"][:, 1]], -1)
    for col, mode in enumerate(MODES, start=1):
        fig.add_trace(go.Bar(x=labels, y=d[mode]["advantages"], marker_color=colors, name=mode, showlegend=False,
                             customdata=np.concatenate([custom, d[mode]["rewards"][:, None]], -1),
                             hovertemplate="answer %{x}<br>correct %{customdata[0]:.0f}, proxy %{customdata[1]:.3f}"
                                           "<br>R %{customdata[2]:.3f}<br>A %{y:+.3f}<extra></extra>"),
                      row=1, col=col)
    for mode in MODES:
        fig.add_trace(go.Scatter(x=sweep["scale"], y=sweep[mode], name=mode, line=dict(color=MODE_COLORS[mode]),
                                 hovertemplate="scale %{x:.2f}<br>mean A of right answers %{y:+.3f}<extra></extra>"),
                      row=1, col=3)
    for mode in MODES:
        fig.add_trace(go.Scatter(x=[scale], y=[d[mode]["correct_mean"]], mode="markers", showlegend=False,
                                 marker=dict(color=MODE_COLORS[mode], size=11, line=dict(width=1, color="white")),
                                 hovertemplate=f"{mode}<br>scale %{{x:.2f}}<br>%{{y:+.3f}}<extra></extra>"),
                      row=1, col=3)
    fig.update_xaxes(title_text="answer: #, length", tickangle=-90, tickfont_size=10, row=1, col=1)
    fig.update_xaxes(title_text="answer: #, length", tickangle=-90, tickfont_size=10, row=1, col=2)
    fig.update_xaxes(title_text="scale of the length reward", type="log", dtick=1, row=1, col=3)
    fig.update_yaxes(title_text="GRPO advantage A", row=1, col=1)
    fig.update_yaxes(title_text="mean A", row=1, col=3)
    shapes = [dict(type="line", x0=0, x1=1, xref="x3 domain", y0=0, y1=0, yref="y3",
                   line=dict(color=NEUTRAL, width=1, dash="dot"))]
    title = (f"one group of {len(d['correct'])}: correctness (weight {d['weights'][0]:g}) + {scale:g} × |y|/L "
             f"(weight {weight:g}); blue = right, red = wrong")
    fig.update_layout(title=dict(text=title, font=dict(size=13)), template="plotly_white", height=500,
                      shapes=shapes, margin=dict(t=110, b=130),  # the legend under the slanted answer labels
                      legend=dict(orientation="h", yref="container", y=0, yanchor="bottom", x=1, xanchor="right"))
    return fig


def aggregation_explorer(scale: float = 10.0, weight: float = 0.5):
    """Sliders for the length reward's scale (log) and weight, redrawing `aggregation_figure`. Returns an
    ipywidgets.VBox with `.figure`, `.controls` and `.update`."""
    import ipywidgets as W

    controls = {
        "scale": W.FloatLogSlider(value=scale, base=10, min=-1, max=2, step=0.05, description="scale of |y|/L",
                                  readout_format=".2f", continuous_update=False,
                                  style={"description_width": "initial"}),
        "weight": slider(weight, 0.0, 2.0, 0.05, "weight w₂"),
    }
    return explorer(controls, aggregation_figure)


# ----------------------------------------------------------------------------------------------------
# 2. Length rewards against the response length


def length_reward_curves(max_len: int = 10, buffer: int = 2, alpha: float = 1e-3, lengths=None) -> dict:
    """Each length reward at every length 1..max_len (tokens, EOS included), from the registered functions:
    {"lengths", "cosine_correct", "cosine_wrong" (`cosine-length`, L = max_len), "soft_overlong" (its penalty,
    buffer C), "budgets" (`hbpo-reward`'s default budgets for this max_new_tokens), "hbpo" {b: R(n | b) of a right
    answer}, "hbpo_wrong" (a wrong answer: 0)}."""
    from workbench.rollout.hbpo import budgets_for

    if not 1 <= buffer <= max_len:
        raise ValueError(f"buffer must be in [1, max_len={max_len}], got {buffer}")
    lengths = np.arange(1, max_len + 1) if lengths is None else np.asarray(lengths, dtype=int)
    completions, ids = fake_completions(lengths)
    n = len(lengths)

    def cosine(score):
        return np.array(reward_fn("cosine-length")(completions, ids, max_len=max_len, scores=[score] * n), float)

    out = {"lengths": lengths, "max_len": max_len, "buffer": buffer, "alpha": alpha,
           "cosine_correct": cosine(1.0), "cosine_wrong": cosine(0.0),
           "soft_overlong": np.array(reward_fn("soft-overlong")(completions, ids, buffer=buffer,
                                                                max_completion_len=max_len), float),
           "budgets": budgets_for(max_len), "hbpo": {}}
    for b in out["budgets"]:
        out["hbpo"][b] = np.array(reward_fn("hbpo-reward")(completions, ids, max_len=max_len, alpha=alpha,
                                                           budget=[b] * n, scores=[1.0] * n), float)
    out["hbpo_wrong"] = np.array(reward_fn("hbpo-reward")(completions, ids, max_len=max_len, alpha=alpha,
                                                          budget=[out["budgets"][0]] * n, scores=[0.0] * n), float)
    return out


ARLCP_OTHER_REFLECTIONS = (10, 20, 30, 40, 50, 60, 70)      # the group's other correct responses
ARLCP_OTHER_LENGTHS = (200, 300, 400, 500, 600, 700, 800)


def arlcp_grid(reflections=None, lengths=None, others_reflections=ARLCP_OTHER_REFLECTIONS,
               others_lengths=ARLCP_OTHER_LENGTHS, **hp) -> dict:
    """ARLCP's penalty w1 sigma(z_c) + w2 sigma(z_L) of one more correct response with c reflection words and L
    tokens, in a group whose other correct responses are `others_*`: `arlcp_penalty` on one group per grid cell
    (the response's own values count in its group's statistics, as in training). Returns {"reflections" [X],
    "lengths" [Y], "z_c" [X], "z_L" [Y] (the response's z-scores, from `correct_stats`), "penalty" [Y, X]}."""
    from workbench.rewards.arlcp import arlcp_penalty, correct_stats

    cs = np.arange(0, 122, 2) if reflections is None else np.asarray(reflections, dtype=float)
    ls = np.arange(0, 1025, 25) if lengths is None else np.asarray(lengths, dtype=float)
    k = len(others_reflections) + 1
    grid_c, grid_l = np.meshgrid(cs, ls)                                   # [Y, X]
    cells = grid_c.size
    counts = np.concatenate([np.tile(others_reflections, (cells, 1)), grid_c.reshape(-1, 1)], 1).reshape(-1)
    lens = np.concatenate([np.tile(others_lengths, (cells, 1)), grid_l.reshape(-1, 1)], 1).reshape(-1)
    counts, lens = torch.tensor(counts, dtype=torch.float64), torch.tensor(lens, dtype=torch.float64)
    group = torch.arange(cells).repeat_interleave(k)
    correct = torch.ones(cells * k, dtype=torch.bool)
    penalty = arlcp_penalty(counts, lens, correct, group, **hp)
    probe = torch.arange(cells) * k + (k - 1)                              # the response's row in each group
    mu_c, sd_c = correct_stats(counts, correct, group)
    mu_l, sd_l = correct_stats(lens, correct, group)
    eps = hp.get("eps", registry.get("reward_shaping", "arlcp").defaults["eps"])
    z_c = ((counts - mu_c) / (sd_c + eps))[probe].numpy().reshape(grid_c.shape)
    z_l = ((lens - mu_l) / (sd_l + eps))[probe].numpy().reshape(grid_c.shape)
    return {"reflections": cs, "lengths": ls, "z_c": z_c[0], "z_L": z_l[:, 0],
            "penalty": penalty[probe].numpy().reshape(grid_c.shape)}


def _bracket_z(grid: dict, bracket: float) -> float | None:
    """The z_c at which the reflection count crosses `bracket` (interpolated on the grid), None off the grid."""
    c, z = grid["reflections"], grid["z_c"]
    if not c[0] <= bracket <= c[-1]:
        return None
    return float(np.interp(bracket, c, z))


def length_reward_figure(max_len: int = 10, buffer: int = 2, alpha: float = 1e-3) -> go.Figure:
    """Four panels, a fixed set of traces: `cosine-length` (right and wrong answers), `soft-overlong` (its buffer
    shaded), `hbpo-reward` (one curve per budget, a right answer; a wrong one gets 0), and ARLCP's penalty over the
    reflection and length z-scores of a correct response (the bracket edges c = 40, 80 dotted)."""
    d = length_reward_curves(max_len, buffer, alpha)
    grid = arlcp_grid()
    L, C = d["max_len"], d["buffer"]
    fig = make_subplots(rows=2, cols=2, horizontal_spacing=0.12, vertical_spacing=0.16, subplot_titles=(
        f"cosine-length, L = {L}", f"soft-overlong, buffer C = {C} of L = {L}",
        f"hbpo-reward (right answers), budgets {', '.join(map(str, d['budgets']))}",
        "arlcp: penalty of a correct response"))
    x = d["lengths"]
    for key, name, color in (("cosine_correct", "right answer", POSITIVE), ("cosine_wrong", "wrong answer", NEGATIVE)):
        fig.add_trace(go.Scatter(x=x, y=d[key], mode="lines+markers", name=f"cosine-length: {name}",
                                 line=dict(color=color), hovertemplate="|y| %{x}<br>r %{y:+.3f}<extra></extra>"),
                      row=1, col=1)
    fig.add_trace(go.Scatter(x=x, y=d["soft_overlong"], mode="lines+markers", name="soft-overlong penalty",
                             line=dict(color=BUFFER_COLOR), hovertemplate="|y| %{x}<br>r %{y:+.3f}<extra></extra>"),
                  row=1, col=2)
    for i, b in enumerate(d["budgets"]):
        fig.add_trace(go.Scatter(x=x, y=d["hbpo"][b], mode="lines+markers", name=f"hbpo: budget b = {b}",
                                 line=dict(color=RUN_COLORS[(i + 2) % len(RUN_COLORS)]),
                                 hovertemplate=f"b = {b}<br>|y| %{{x}}<br>R %{{y:+.4f}}<extra></extra>"),
                      row=2, col=1)
    fig.add_trace(go.Heatmap(x=grid["z_c"], y=grid["z_L"], z=grid["penalty"], colorscale="Reds", zmin=0, zmax=0.2,
                             colorbar=dict(title="penalty", len=0.4, y=0.2),
                             customdata=np.stack(np.meshgrid(grid["reflections"], grid["lengths"]), -1),
                             hovertemplate="c = %{customdata[0]:.0f} (z %{x:+.2f})<br>L = %{customdata[1]:.0f} "
                                           "(z %{y:+.2f})<br>penalty %{z:.4f}<extra></extra>"), row=2, col=2)
    shapes = [dict(type="rect", x0=L - C, x1=L, xref="x2", y0=0, y1=1, yref="y2 domain", fillcolor=BUFFER_COLOR,
                   opacity=0.15, line_width=0, layer="below")]
    for bracket in (40, 80):
        z = _bracket_z(grid, bracket)
        if z is not None:
            shapes.append(dict(type="line", x0=z, x1=z, xref="x4", y0=0, y1=1, yref="y4 domain",
                               line=dict(color=NEUTRAL, dash="dot", width=1)))
    fig.update_xaxes(title_text="response length |y| (tokens)", row=1, col=1)
    fig.update_xaxes(title_text="response length |y| (tokens)", row=1, col=2)
    fig.update_xaxes(title_text="response length n (tokens)", row=2, col=1)
    fig.update_xaxes(title_text="reflection words, z_c", row=2, col=2)
    fig.update_yaxes(title_text="reward", row=1, col=1)
    fig.update_yaxes(title_text="penalty", row=1, col=2)
    fig.update_yaxes(title_text="R(n | b)", row=2, col=1)
    fig.update_yaxes(title_text="length, z_L", row=2, col=2)
    fig.update_layout(title=dict(text="length rewards from the registered functions (L = max_new_tokens)",
                                 font=dict(size=13)), template="plotly_white", height=760, shapes=shapes,
                      legend=dict(orientation="h", y=-0.12))
    return fig


def length_explorer(max_len: int = 10, buffer: int = 2, alpha: float = 1e-3):
    """Sliders for the budget L, soft-overlong's buffer C and HBPO's overrun penalty alpha, redrawing
    `length_reward_figure`. Returns an ipywidgets.VBox with `.figure`, `.controls` and `.update`."""
    import ipywidgets as W

    controls = {
        "max_len": W.IntSlider(value=max_len, min=4, max=64, description="budget L", continuous_update=False),
        "buffer": W.IntSlider(value=buffer, min=1, max=max_len, description="buffer C", continuous_update=False),
        "alpha": slider(alpha, 0.0, 0.05, 0.001, "hbpo α"),
    }
    controls["alpha"].readout_format = ".3f"

    def bound_buffer(change):  # the buffer cannot exceed the budget (soft-overlong refuses it); observed before the
        controls["buffer"].max = change["new"]  # redraw, so a lower budget clamps the buffer before it is drawn

    controls["max_len"].observe(bound_buffer, names="value")
    return explorer(controls, length_reward_figure)


def length_table(max_len: int = 10, buffer: int = 2, lengths=range(4, 11)) -> str:
    """The length rewards at the lengths countdown answers have (text, one row per length)."""
    d = length_reward_curves(max_len, buffer, lengths=list(lengths))
    head = (f"{'|y|':>4} {'cosine right':>13} {'cosine wrong':>13} {'soft-overlong':>14} "
            + " ".join(f"{'hbpo b=' + str(b):>10}" for b in d["budgets"]))
    lines = [head]
    for i, n in enumerate(d["lengths"]):
        lines.append(f"{n:>4} {d['cosine_correct'][i]:>13.3f} {d['cosine_wrong'][i]:>13.3f} "
                     f"{d['soft_overlong'][i]:>14.3f} " + " ".join(f"{d['hbpo'][b][i]:>10.3f}" for b in d["budgets"]))
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------------
# Stored comparisons: what moved, in words


def _seed_mean(seeds: list[list[dict]], key: str, which: str) -> float | None:
    """Mean over seeds of the first or last logged value of `key`, None when no seed logs it."""
    ends = [values[0] if which == "first" else values[-1] for values in (metric_series(rows, key)[1] for rows in seeds)
            if values]
    return statistics.fmean(ends) if ends else None


def stored_summary(groups: Mapping[str, list[list[dict]]], summaries: Sequence[Mapping],
                   keys: Sequence[str] = ("response_length/mean", "truncated_frac")) -> list[dict]:
    """Per recipe (stored order): the mean over seeds of each key's first and last logged value, and greedy held-out
    accuracy before / after (`before_after_rows`: the mean over seeds, and the after values' std when there are two
    seeds or more)."""
    accuracy = {row["recipe"]: row for row in before_after_rows(summaries, (("accuracy", "greedy accuracy"),))}
    out = []
    for recipe, seeds in groups.items():
        row = {"recipe": recipe, "seeds": len(seeds)}
        for key in keys:
            row[key] = (_seed_mean(seeds, key, "first"), _seed_mean(seeds, key, "last"))
        held_out = accuracy.get(recipe, {})
        row["accuracy_before"], row["accuracy_after"] = held_out.get("accuracy_before"), held_out.get("accuracy_after")
        row["accuracy_after_std"] = held_out["accuracy_after_std"] if held_out.get("seeds", 0) > 1 else None
        out.append(row)
    return out


def stored_summary_text(groups, summaries, keys: Sequence[str] = ("response_length/mean", "truncated_frac")) -> str:
    """`stored_summary` as one line per recipe: "key first -> last" for each key, then held-out accuracy."""
    def num(v, fmt=".3f"):
        return "–" if v is None else format(v, fmt)

    lines = []
    for row in stored_summary(groups, summaries, keys):
        parts = [f"{key} {num(row[key][0])} -> {num(row[key][1])}" for key in keys]
        spread = f" ± {row['accuracy_after_std']:.3f}" if row["accuracy_after_std"] is not None else ""
        parts.append(f"held-out accuracy {num(row['accuracy_before'])} -> {num(row['accuracy_after'])}{spread}")
        lines.append(f"{row['recipe']:18s} " + ";  ".join(parts))
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------------
# 3. A reward that can be gamed, and CGPO's judges


HACK_BUDGET = 10
HACK_GROUPS = {  # (correct, length, truncated) of 8 answers, for a prompt the policy can solve and one it cannot
    "a prompt it solves sometimes": ((1, 5, 0), (0, 6, 0), (1, 5, 0), (0, 10, 1), (0, 8, 0), (0, 10, 1), (0, 7, 0),
                                     (0, 9, 0)),
    "a prompt it cannot solve": ((0, 5, 0), (0, 6, 0), (0, 4, 0), (0, 10, 1), (0, 8, 0), (0, 10, 1), (0, 7, 0),
                                 (0, 9, 0)),
}
HACK_RECIPES = ("grpo", "length-bias", "length-bias-cgpo")


def cgpo_settings(recipe: str = "length-bias-cgpo") -> dict:
    """The keyword arguments of the recipe's `cgpo` reward shaping (its judges and length threshold)."""
    return dict(next(u for u in get_recipe(recipe).reward_shaping if u.key == "cgpo").kw)


def hacking_rewards(answers, max_len: int = HACK_BUDGET, cgpo_kw: Mapping | None = None) -> dict:
    """One group under three recipes of f6-hacking, from the library: "grpo" (the verifier's 0/1),
    "length-bias" (verifier + the registered `length-bias` |y|/L, summed as the reward stage does) and
    "length-bias-cgpo" (that sum through the registered `cgpo` reward shaping with `cgpo_kw`, by default the
    recipe's: format and length judges, the length threshold at 9 of 10 tokens). Returns
    {"correct", "lengths", "truncated", "flagged" (CGPO's violations: the rows it set to -1), "metrics" (what cgpo
    logged), recipe: {"rewards", "advantages"}}."""
    correct = np.array([a[0] for a in answers], dtype=float)
    lengths = np.array([a[1] for a in answers], dtype=int)
    truncated = torch.tensor([bool(a[2]) for a in answers])
    sums = combined_rewards(np.stack([correct, length_proxy(lengths, max_len)], 1), [1.0, 1.0], "sum_then_normalize")
    batch = replace(RolloutBatch.from_rewards(sums, lengths=lengths), truncated=truncated,
                    prompts=[""] * len(lengths), completions=[""] * len(lengths))
    ctx = SimpleNamespace(max_new_tokens=max_len, metrics={})
    shaped = registry.get("reward_shaping", "cgpo").fn(batch, ctx, **(cgpo_settings() if cgpo_kw is None
                                                                       else cgpo_kw)).rewards
    flagged = shaped == -1.0  # feasible rows get sigma(R - mean) in (0, 1)
    out = {"correct": correct.astype(bool), "lengths": lengths, "truncated": truncated.numpy(),
           "flagged": flagged.numpy(), "metrics": ctx.metrics}
    for recipe, rewards in (("grpo", torch.as_tensor(correct)), ("length-bias", sums), ("length-bias-cgpo", shaped)):
        out[recipe] = {"rewards": rewards.double().numpy(), "advantages": grpo_advantages(rewards)}
    return out


def hacking_figure(groups: Mapping = HACK_GROUPS, max_len: int = HACK_BUDGET) -> go.Figure:
    """One panel per group: each answer's GRPO advantage under grpo, length-bias and length-bias-cgpo (bars
    grouped by answer; the x label says right / wrong, its length, and "cut" / "flagged")."""
    fig = make_subplots(rows=1, cols=len(groups), shared_yaxes=True, horizontal_spacing=0.06,
                        subplot_titles=list(groups))
    for col, (name, answers) in enumerate(groups.items(), start=1):
        d = hacking_rewards(answers, max_len)
        labels = [f"{i}: {'right' if c else 'wrong'}, {n}{' cut' if t else ''}{' ⚑' if f else ''}"
                  for i, (c, n, t, f) in enumerate(zip(d["correct"], d["lengths"], d["truncated"], d["flagged"]))]
        for k, recipe in enumerate(HACK_RECIPES):
            fig.add_trace(go.Bar(x=labels, y=d[recipe]["advantages"], name=recipe, legendgroup=recipe,
                                 showlegend=col == 1, marker_color=RUN_COLORS[k],
                                 customdata=d[recipe]["rewards"],
                                 hovertemplate=f"{recipe}<br>%{{x}}<br>R %{{customdata:.3f}}<br>A %{{y:+.3f}}"
                                               "<extra></extra>"), row=1, col=col)
        fig.update_xaxes(title_text="answer: verdict, length", row=1, col=col)
    fig.update_yaxes(title_text="GRPO advantage", row=1, col=1)
    fig.update_layout(title=dict(text=f"why padding pays under a length-biased reward (budget {max_len}), and what "
                                      "CGPO's judges do to it<br><sup>x: each answer's verdict and length (cut: "
                                      "truncated, ⚑: a judge flags it)</sup>", font=dict(size=13)), barmode="group",
                      template="plotly_white", height=480, legend=dict(x=1.01, y=1))  # clear of the slanted labels
    return fig


# ----------------------------------------------------------------------------------------------------
# 4. Per-reward curves of a multi-reward run


def reward_names(rows: Sequence[Mapping]) -> list[str]:
    """The reward names with a logged `rewards/<name>/mean` in any row (first-seen order; "task" first)."""
    seen: dict[str, None] = {}
    for row in rows:
        for key in row:
            if PER_REWARD.fullmatch(key) and key.endswith("/mean"):
                seen.setdefault(key.split("/")[1])
    names = list(seen)
    return sorted(names, key=lambda n: n != "task")


def per_reward_series(rows: Sequence[Mapping], name: str) -> dict:
    """{"step", "mean", "std"} of one reward over the rows that log its mean (std NaN where not logged)."""
    steps, means, stds = [], [], []
    for row in rows:
        mean = row.get(f"rewards/{name}/mean")
        if isinstance(mean, (int, float)) and math.isfinite(mean):
            std = row.get(f"rewards/{name}/std")
            steps.append(row["step"]), means.append(float(mean))
            stds.append(float(std) if isinstance(std, (int, float)) and math.isfinite(std) else float("nan"))
    return {"step": np.array(steps), "mean": np.array(means), "std": np.array(stds)}


# The values a reward can take where that does not depend on its settings: the verifier's score is a share in [0, 1];
# these penalties are never positive (their floor depends on their factor / max_penalty). None: no bound that side.
REWARD_RANGES = {"task": (0.0, 1.0), "soft-overlong": (None, 0.0), "repetition-penalty": (None, 0.0)}


def range_text(lo, hi) -> str:
    if lo is not None and hi is not None:
        return f"[{lo:g}, {hi:g}]"
    return f"≤ {hi:g}" if hi is not None else f"≥ {lo:g}"


def per_reward_figure(rows: Sequence[Mapping], title: str | None = None,
                      ranges: Mapping[str, tuple] | None = None) -> go.Figure:
    """One panel per reward of one run: its batch mean `rewards/<name>/mean` (line) and mean ± its batch std
    `rewards/<name>/std` (band), the band cut at the reward's possible range (`ranges`, default REWARD_RANGES: a
    band of a [0, 1] score never dips below 0). A range the logged means leave is not the run's: no cut there. The
    title's second line says which bands are cut."""
    ranges = REWARD_RANGES if ranges is None else ranges
    for name, bounds in ranges.items():
        if not (isinstance(bounds, (tuple, list)) and len(bounds) == 2
                and (None in bounds or bounds[0] <= bounds[1])):
            raise ValueError(f"ranges[{name!r}] = {bounds!r}: give (lowest, highest), None for no bound that side")
    names = reward_names(rows)
    if not names:
        raise ValueError("no rewards/<name>/mean in these rows: the run has no reward functions (only the "
                         "environment's score, logged as reward/mean)")
    cols = min(3, len(names))
    nrows = math.ceil(len(names) / cols)
    fig = make_subplots(rows=nrows, cols=cols, subplot_titles=[f"rewards/{n}/mean ± std" for n in names],
                        horizontal_spacing=0.08, vertical_spacing=min(0.2, 0.6 / nrows))
    cut = []
    for i, name in enumerate(names):
        s = per_reward_series(rows, name)
        color = RUN_COLORS[i % len(RUN_COLORS)]
        where = dict(row=i // cols + 1, col=i % cols + 1)
        std = np.nan_to_num(s["std"])
        lo, hi = s["mean"] - std, s["mean"] + std
        floor, top = ranges.get(name, (None, None))
        if (floor is not None or top is not None) and np.all((floor is None or s["mean"] >= floor)
                                                              & (top is None or s["mean"] <= top)):
            lo, hi = np.clip(lo, floor, top), np.clip(hi, floor, top)
            cut.append(f"{name} {range_text(floor, top)}")
        fig.add_trace(go.Scatter(x=np.concatenate([s["step"], s["step"][::-1]]),
                                 y=np.concatenate([hi, lo[::-1]]), mode="lines",
                                 fill="toself",
                                 fillcolor=color, opacity=0.2, line=dict(width=0), hoverinfo="skip",
                                 showlegend=False), **where)
        fig.add_trace(go.Scatter(x=s["step"], y=s["mean"], name=name, line=dict(color=color), showlegend=False,
                                 hovertemplate=f"{name}<br>step %{{x}}<br>mean %{{y:+.3f}}<extra></extra>"), **where)
        fig.update_xaxes(title_text="step", **where)
    fig.update_annotations(font_size=11)  # three long panel titles side by side must not overlap
    note = "band: mean ± the batch's std" + (f", cut at the reward's possible values ({'; '.join(cut)})"
                                              if cut else "")
    fig.update_layout(title=f"{title or 'per-reward curves'}<br><sup>{note}</sup>", template="plotly_white",
                      height=max(320, 280 * nrows))
    return fig


def reward_spread(rows: Sequence[Mapping], weights: Mapping[str, float] | None = None) -> list[dict]:
    """Per reward: its mean over the run, its mean within-batch std, and weight x std (how much of the combined
    reward's spread it brings under sum_then_normalize; `weights` default 1)."""
    out = []
    for name in reward_names(rows):
        s = per_reward_series(rows, name)
        std = s["std"][~np.isnan(s["std"])]
        w = (weights or {}).get(name, 1.0)
        mean_std = float(std.mean()) if len(std) else float("nan")
        out.append({"reward": name, "mean": float(s["mean"].mean()), "std": mean_std, "weight": w,
                    "weighted_std": w * mean_std})
    return out


# ----------------------------------------------------------------------------------------------------
# 5. Checklists and process rewards


CHECKLIST_PROMPT = "37*48+19="
CHECKLIST_ACTIONS = ("[37*40]", "[1776+19]", "[37*48]", "[1776+19]", "A:1795")  # a wasted call, a guess, the path
CELL_KINDS = ("blocked: a dependency is not satisfied yet", "eligible, not satisfied after this step",
              "backfilled r̃ = 1 (an eligible step before the paying one)", "pays r = 1 (first flip to satisfied)",
              "already satisfied before this step")
CELL_COLORS = ("#f2f2f2", "#ffffff", "#a1d99b", "#238b45", "#bdbdbd")


def checklist_episode(prompt: str = CHECKLIST_PROMPT, actions=CHECKLIST_ACTIONS, correct: bool = True,
                      noise: float = 0.0, seed: int = 0) -> dict:
    """CM2's checklist of one calculator episode, from `workbench.rewards.checklist`: the items, the judge's labels
    after each step (`rule_judge`, each label flipped with probability `noise`, seeded), and per cell (item c,
    step s) its kind (an index into CELL_KINDS). Returns {"items", "actions", "sat" [S, C], "eligible", "paid",
    "backfilled", "kind" [C, S], "reward" R}."""
    import random

    from workbench.rewards.checklist import (Row, backfilled, calculator_checklist, calculator_states, eligible,
                                             labels, rule_judge, states_before, step_rewards, with_noise)

    items = calculator_checklist(prompt)
    states = calculator_states(list(actions), correct, inline=False)
    sat, deps = labels(items, states, with_noise(rule_judge, noise, random.Random(seed)))
    elig, paid, back = eligible(sat, deps), step_rewards(sat, deps), backfilled(sat, deps)
    before = states_before(sat.bool())
    kind = torch.where(before, 4, torch.where(paid, 3, torch.where(back, 2, torch.where(elig, 1, 0))))
    weights = torch.tensor([item.weight for item in items], dtype=torch.float64)
    return {"items": items, "actions": list(actions), "sat": sat.numpy(), "eligible": elig.numpy(),
            "paid": paid.numpy(), "backfilled": back.numpy(), "kind": kind.T.numpy(),
            "reward": Row(items, sat, deps, weights).reward}


def checklist_grid_figure(prompt: str = CHECKLIST_PROMPT, actions=CHECKLIST_ACTIONS, correct: bool = True,
                          noise: float = 0.0, seed: int = 0) -> go.Figure:
    """Items (rows) × steps (columns) of one episode: each cell coloured by its kind (CELL_KINDS), with the judge's
    label after the step (✓ satisfied, · not) and r = 1 / r̃ = 1 written where they are."""
    d = checklist_episode(prompt, actions, correct, noise, seed)
    items = d["items"]
    C, S = d["kind"].shape
    y = [f"{it.id}: {it.text}" + (f" (needs {', '.join(it.deps)})" if it.deps else "") + (" [strict]" if it.strict
                                                                                            else "")
         for it in items]
    x = [f"s={s}: {a}" for s, a in enumerate(d["actions"])]
    n = len(CELL_KINDS)
    scale = [v for k, color in enumerate(CELL_COLORS) for v in ((k / n, color), ((k + 1) / n, color))]
    text = [["✓" if d["sat"][s, c] else "·" for s in range(S)] for c in range(C)]
    for c in range(C):
        for s in range(S):
            if d["paid"][s, c]:
                text[c][s] += "  r = 1"
            elif d["backfilled"][s, c]:
                text[c][s] += "  r̃ = 1"
    names = np.array(CELL_KINDS, dtype=object)[d["kind"]]
    fig = go.Figure(go.Heatmap(z=d["kind"] + 0.5, x=x, y=y, zmin=0, zmax=n, colorscale=scale, showscale=False,
                               text=text, texttemplate="%{text}", customdata=names, xgap=2, ygap=2,
                               hovertemplate="%{y}<br>%{x}<br>%{customdata}<extra></extra>"))
    for k, (kind, color) in enumerate(zip(CELL_KINDS, CELL_COLORS)):  # a legend for the colours
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=kind, marker=dict(
            symbol="square", size=12, color=color, line=dict(width=1, color=NEUTRAL))))
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(title=dict(text=f"cm2-checklist on {prompt} ({'right' if correct else 'wrong'} answer"
                                      f"{f', judge noise {noise:g}' if noise else ''}): R = {d['reward']:.3f} "
                                      "(✓: the judge's label after the step)", font=dict(size=13)),
                      template="plotly_white", height=200 + 70 * C, xaxis=dict(side="top"),
                      legend=dict(orientation="h", y=-0.08), margin=dict(l=10, t=110))
    return fig


def reflection_figure(max_reflections: int = 20) -> go.Figure:
    """Left: SRPO's accuracy term for the (first, last) answers (`srpo_accuracy`: 2 × 2, and one answer alone).
    Right: ReflexiCoder's cycle regulation P(n) over the number of reflections (`cycle_regulation`)."""
    from workbench.rewards.reflection import cycle_regulation, srpo_accuracy

    grid = np.array([[srpo_accuracy(first, last, 2) for last in (False, True)] for first in (False, True)])
    single = [srpo_accuracy(False, False, 1), srpo_accuracy(True, True, 1)]
    n = np.arange(0, max_reflections + 1)
    p = np.array([cycle_regulation(int(k)) for k in n])
    fig = make_subplots(rows=1, cols=3, column_widths=[0.3, 0.15, 0.55], horizontal_spacing=0.1, subplot_titles=(
        "srpo-reflection: first → last answer", "one answer", "reflexicoder: P(n)"))
    fig.add_trace(go.Heatmap(z=grid, x=["last wrong", "last right"], y=["first wrong", "first right"],
                             colorscale="Blues", zmin=0, zmax=1, showscale=False, text=grid,
                             texttemplate="%{text:.2f}", hovertemplate="%{y}, %{x}: %{z:.2f}<extra></extra>"),
                  row=1, col=1)
    fig.add_trace(go.Bar(x=["wrong", "right"], y=single, marker_color=[NEGATIVE, POSITIVE], showlegend=False,
                         text=[f"{v:.2f}" for v in single], hovertemplate="%{x}: %{y:.2f}<extra></extra>"),
                  row=1, col=2)
    fig.add_trace(go.Bar(x=n, y=p, marker_color=POSITIVE, showlegend=False,
                         hovertemplate="n = %{x}<br>P(n) %{y:.3f}<extra></extra>"), row=1, col=3)
    fig.update_xaxes(title_text="reflection rounds n", row=1, col=3)
    fig.update_yaxes(title_text="accuracy term", range=[0, 1.05], row=1, col=2)
    fig.update_yaxes(title_text="P(n)", range=[0, 1.05], row=1, col=3)
    fig.update_layout(title=dict(text="reflection rewards: SRPO pays a corrected answer most, ReflexiCoder caps the "
                                      "rounds", font=dict(size=13)), template="plotly_white", height=380)
    return fig


def schedules(steps: int = 100, spear_frac: float = 0.5) -> dict:
    """Decay schedules over a run of `steps` steps: SPEAR's tool-call coefficient c(t) (`toolcall_coefficient`,
    T_tool = spear_frac × steps, as the `spear-tool-reward` recipe sets it) and RetroAgent's coef(t)
    (`reflection_coefficient`, "exp" and "hard_cutoff"). Returns {"progress", "spear", "retro_exp",
    "retro_cutoff"}."""
    from workbench.rewards.retroagent import reflection_coefficient
    from workbench.rewards.tools import toolcall_coefficient

    t = np.arange(steps + 1)
    return {"progress": t / steps, "step": t,
            "spear": np.array([toolcall_coefficient(float(s), max_toolcall_steps=spear_frac * steps) for s in t]),
            "retro_exp": np.array([reflection_coefficient(s / steps, decay="exp") for s in t]),
            "retro_cutoff": np.array([reflection_coefficient(s / steps, decay="hard_cutoff") for s in t])}


def schedules_figure(steps: int = 100, spear_frac: float = 0.5) -> go.Figure:
    """SPEAR's c(t) and RetroAgent's coef(t) against training progress t / T."""
    d = schedules(steps, spear_frac)
    fig = go.Figure()
    for key, name, color, dash in (("spear", f"spear-tool-reward c(t), T_tool = {spear_frac:g} T", POSITIVE, "solid"),
                                   ("retro_exp", "retroagent coef(t) = exp(−5 t/T)", NEGATIVE, "solid"),
                                   ("retro_cutoff", "retroagent hard cutoff (0 after 0.1 T)", NEGATIVE, "dot")):
        fig.add_trace(go.Scatter(x=d["progress"], y=d[key], name=name, line=dict(color=color, dash=dash),
                                 hovertemplate="t/T %{x:.2f}<br>%{y:.3f}<extra></extra>"))
    fig.update_xaxes(title_text="training progress t / T")
    fig.update_yaxes(title_text="coefficient", range=[0, 1.05])
    fig.update_layout(title="intrinsic rewards that fade: tool calls (SPEAR) and improvement (RetroAgent)",
                      template="plotly_white", height=380, legend=dict(orientation="h", y=-0.25))
    return fig


def ssl_tiers(distances=None, progress=None, sigma: float = 0.1) -> dict:
    """SSL's tiers (`distance_tier` for K = 1..4 at `sigma`, `progress_tier` for K = 1..4): {"distance",
    "progress", ("distance", K): rewards, ("progress", K): rewards}."""
    from workbench.rewards.ssl import distance_tier, progress_tier

    d = np.linspace(0.0, 0.3, 301) if distances is None else np.asarray(distances, dtype=float)
    p = np.linspace(0.0, 1.0, 101) if progress is None else np.asarray(progress, dtype=float)
    out = {"distance": d, "progress": p, "sigma": sigma}
    for K in (1, 2, 3, 4):
        out[("distance", K)] = np.array([distance_tier(float(x), sigma=sigma, K=K) for x in d])
        out[("progress", K)] = np.array([progress_tier(float(x), K=K) for x in p])
    return out


def ssl_figure(sigma: float = 0.1) -> go.Figure:
    """Left: the distance tiers against the relative distance to the gold. Right: the progress tiers."""
    d = ssl_tiers(sigma=sigma)
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1, subplot_titles=(
        f"distance tiers, σ = {sigma:g}", "progress tiers"))
    for i, K in enumerate((1, 2, 3, 4)):
        color = RUN_COLORS[i]
        for col, signal in ((1, "distance"), (2, "progress")):
            fig.add_trace(go.Scatter(x=d[signal], y=d[(signal, K)], name=f"K = {K}", legendgroup=str(K),
                                     showlegend=col == 1, line=dict(color=color, shape="hv"),
                                     hovertemplate=f"K = {K}<br>%{{x:.3f}}: r %{{y:.2f}}<extra></extra>"),
                          row=1, col=col)
    fig.update_xaxes(title_text="relative distance |pred − gold| / |gold|", row=1, col=1)
    fig.update_xaxes(title_text="progress p (share of the expert's intermediate results)", row=1, col=2)
    fig.update_yaxes(title_text="reward", row=1, col=1)
    fig.update_layout(title="ssl: a near miss earns part of the reward (K = 1 is the binary reward)",
                      template="plotly_white", height=380, legend=dict(orientation="h", y=-0.25))
    return fig


FAPO_EXAMPLES = (  # (completion, the verifier's verdict)
    ("3+4=7, 7*2=14. Answer: 14", 1.0),
    ("3+4=8, 8*2=14. Answer: 14", 1.0),
    ("3+4=7, 7*2=15. Answer: 15", 0.0),
)


def fapo_rows(examples=FAPO_EXAMPLES) -> list[dict]:
    """The registered `fapo` reward of each (completion, verdict), and the toy detector's earliest wrong step
    (`first_wrong_step`, None where FAPO does not ask it: wrong answers)."""
    from workbench.rewards.fapo import first_wrong_step

    texts, scores = [e[0] for e in examples], [e[1] for e in examples]
    rewards = reward_fn("fapo")(texts, scores=scores)
    return [{"completion": t, "correct": s >= 1, "flaw": first_wrong_step(t) if s >= 1 else None, "reward": r}
            for t, s, r in zip(texts, scores, rewards)]


def fapo_figure(examples=FAPO_EXAMPLES) -> go.Figure:
    """FAPO's reward of each example: +1 right and clean, 0 a flawed positive (right answer, a false step), -1
    wrong."""
    rows = fapo_rows(examples)
    labels = [f"{r['completion']}<br>({'right' if r['correct'] else 'wrong'}"
              + (f", first wrong step {r['flaw']})" if r["flaw"] not in (None, -1) else ")") for r in rows]
    colors = [POSITIVE if r["reward"] > 0 else NEUTRAL if r["reward"] == 0 else NEGATIVE for r in rows]
    fig = go.Figure(go.Bar(x=labels, y=[r["reward"] for r in rows], marker_color=colors,
                           text=[f"{r['reward']:+g}" for r in rows], hovertemplate="%{x}<br>r %{y:+g}<extra></extra>"))
    fig.update_yaxes(title_text="fapo reward", range=[-1.2, 1.2], zeroline=True)
    fig.update_layout(title="fapo: a right answer reached through a false step (a flawed positive) earns 0, not +1",
                      template="plotly_white", height=380)
    return fig


# ----------------------------------------------------------------------------------------------------
# 6. The recipes of this family


EXTRA_RECIPES = ("length-bias", "length-bias-cgpo", "length-bias-cgpo-tight", "soft-overlong")


def family_recipes(family: str = "rewards", extra: Sequence[str] = EXTRA_RECIPES) -> list[str]:
    """Registered recipe keys whose catalog family is `family`, then those of `extra` that are registered (sorted
    within each part, no repeats)."""
    catalog = registry.catalog()
    keys = [e.key for e in registry.entries("recipe")]
    own = sorted(k for k in keys if catalog.get(k, {}).get("family") == family)
    return own + [k for k in extra if k in keys and k not in own]
