"""Per-token weights of the loss aggregation modes (notebook 02): how much a token of a short and of a long answer
weighs in the step under token-mean, seq-mean-token-mean, seq-mean-token-sum and seq-mean-token-sum-norm (against
the answer's length, and with GRPO's advantage as a push up or down), and what splitting the step into micro-batches
does to those weights (local or global denominators). Pure functions: numbers in, `go.Figure` out.

Every plotted weight is an autograd gradient through `ops.aggregate` (and the library's accumulation loop). The
helpers that compute those numbers are public, so a notebook can print what a figure draws.

    from workbench.viz.aggregation_weights import aggregation_example, length_bias_bars, microbatch_weights
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from workbench import ops
from workbench.advantages.group import grpo
from workbench.batch import RolloutBatch
from workbench.viz.style import log_tickvals

MODE_COLORS = {
    "token-mean": "#1f77b4",
    "seq-mean-token-mean": "#d62728",
    "seq-mean-token-sum": "#2ca02c",
    "seq-mean-token-sum-norm": "#9467bd",
}


# ----------------------------------------------------------------------------------------------------
# Loss aggregation: per-token weights by autograd


def lengths_mask(lengths: Sequence[int], t_max: int | None = None) -> torch.Tensor:
    """[B, T] float64 response mask of answers with the given lengths (T = t_max or the longest answer)."""
    lengths = torch.as_tensor(list(lengths), dtype=torch.long)
    if bool((lengths < 0).any()):
        raise ValueError(f"lengths must be >= 0, got {lengths.tolist()}")
    t = int(lengths.max()) if t_max is None else int(t_max)
    if t < int(lengths.max()):
        raise ValueError(f"t_max = {t} is shorter than the longest answer ({int(lengths.max())})")
    return (torch.arange(max(t, 1))[None, :] < lengths[:, None]).double()


def default_denominators(mode: str, mask: torch.Tensor, l_max: int | None = None) -> ops.Denominators | None:
    """None (the batch's own counts) except for seq-mean-token-sum-norm: C = B * L_max (workbench default)."""
    if mode != "seq-mean-token-sum-norm":
        return None
    l_max = mask.shape[-1] if l_max is None else l_max
    return ops.Denominators(norm_constant=float(mask.shape[0] * l_max))


def sequence_weights(lengths: Sequence[int], mode: str, l_max: int | None = None) -> np.ndarray:
    """[B] per-token weight dL/dℓ_t of each answer's tokens (all tokens of one answer weigh the same) in one batch: the
    step not split into micro-batches (`microbatch_token_weights`, scope "full"). The aggregation is linear in ℓ, so
    this weight is the factor by which a token's own gradient enters the step's gradient, whatever the per-token loss
    is.

    l_max: the generation cap L_max used for seq-mean-token-sum-norm's C = B * L_max (default: longest answer).
    """
    return microbatch_token_weights(lengths, 1, mode, "full", l_max)


def fraction_label(w: float) -> str:
    """1/20 for 0.05, else 3 significant digits."""
    if w == 0:
        return "0"
    inv = 1 / abs(w)
    sign = "-" if w < 0 else ""
    if abs(inv - round(inv)) < 1e-6 * inv:
        return f"{sign}1/{round(inv)}"
    return f"{w:.3g}"


def aggregation_example(lengths: Sequence[int] = (10, 1000), l_max: int | None = None) -> go.Figure:
    """The "10-token vs 1000-token answer" example: per-token weight and whole-answer weight (|y|·w) of each
    answer in one batch, for the four aggregation modes (grouped bars, one colour per answer)."""
    lengths = [int(n) for n in lengths]
    l_max = max(lengths) if l_max is None else int(l_max)
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12, subplot_titles=(
        "per-token weight  ∂L/∂ℓ<sub>t</sub>  (log scale)", "whole-answer weight  |y|·∂L/∂ℓ<sub>t</sub>"))
    weights = {mode: sequence_weights(lengths, mode, l_max) for mode in ops.AGG_MODES}
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]
    for i, n in enumerate(lengths):
        name = f"{n}-token answer" if lengths.count(n) == 1 else f"answer {i} ({n} tokens)"
        per_token = [float(weights[m][i]) for m in ops.AGG_MODES]
        whole = [n * w for w in per_token]
        color = palette[i % len(palette)]
        fig.add_trace(go.Bar(x=list(ops.AGG_MODES), y=per_token, name=name, legendgroup=name, marker_color=color,
                             text=[fraction_label(w) for w in per_token], textposition="outside", textfont_size=10,
                             hovertemplate="%{x}<br>per-token weight %{y:.4g}<extra>" + name + "</extra>"),
                      row=1, col=1)
        fig.add_trace(go.Bar(x=list(ops.AGG_MODES), y=whole, name=name, legendgroup=name, marker_color=color,
                             showlegend=False, text=[f"{w:.3g}" for w in whole], textposition="outside",
                             textfont_size=10,
                             hovertemplate="%{x}<br>answer weight %{y:.4g}<extra>" + name + "</extra>"),
                      row=1, col=2)
    # decades only: 1-2-5 minor labels would crowd the axis; the mode names, slanted, need the bottom margin
    fig.update_yaxes(type="log", tickvals=log_tickvals([float(weights[m][i]) for m in ops.AGG_MODES
                                                        for i in range(len(lengths))]), tickformat="~g", row=1, col=1)
    fig.update_xaxes(tickangle=30)
    fig.update_layout(barmode="group", bargroupgap=0.1, template="plotly_white", height=500, margin=dict(b=150),
                      title=dict(text=f"one batch of {len(lengths)} answers (lengths {lengths})<br><sup>"
                                      f"sum-norm: C = B·L_max = {len(lengths) * l_max}</sup>", font=dict(size=14)),
                      legend=dict(orientation="h", yref="container", y=0, yanchor="bottom"))
    return fig


def weight_vs_length(lengths: Sequence[int] = (5, 10, 20, 50, 100, 200, 500, 1000),
                     l_max: int | None = None) -> go.Figure:
    """Effective per-token weight (left) and whole-answer weight (right) against response length, for the
    four modes, all answers in one batch. Log-log axes."""
    lengths = sorted(int(n) for n in lengths)
    l_max = max(lengths) if l_max is None else int(l_max)
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1, subplot_titles=(
        "per-token weight", "whole-answer weight  |y|·w"))
    for mode in ops.AGG_MODES:
        w = sequence_weights(lengths, mode, l_max)
        color = MODE_COLORS[mode]
        fig.add_trace(go.Scatter(x=lengths, y=w, name=mode, legendgroup=mode, mode="lines+markers",
                                 line=dict(color=color),
                                 hovertemplate="|y| = %{x}<br>w = %{y:.4g}<extra>" + mode + "</extra>"),
                      row=1, col=1)
        fig.add_trace(go.Scatter(x=lengths, y=np.asarray(lengths) * w, name=mode, legendgroup=mode,
                                 mode="lines+markers", line=dict(color=color), showlegend=False,
                                 hovertemplate="|y| = %{x}<br>|y|·w = %{y:.4g}<extra>" + mode + "</extra>"),
                      row=1, col=2)
    fig.update_xaxes(type="log", title_text="response length |y| (tokens)")
    fig.update_yaxes(type="log")
    fig.update_layout(template="plotly_white", height=420, legend=dict(orientation="h", y=-0.25),
                      title=dict(text=f"a batch of {len(lengths)} answers<br><sup>lengths {lengths}; L_max = {l_max}"
                                      "</sup>", font=dict(size=14)))
    return fig


DR_GRPO = ("Dr.GRPO: sum-norm, A without std", "seq-mean-token-sum-norm", "none")


def default_bias_configs() -> list[tuple[str, str, str]]:
    return [(f"{mode}, GRPO A", mode, "group") for mode in ops.AGG_MODES] + [DR_GRPO]


def token_push(rewards: Sequence[float], lengths: Sequence[int], mode: str, scale: str = "group",
               l_max: int | None = None) -> np.ndarray:
    """[B] per-token push -∂L/∂log π(y_t) of each answer, with the on-policy policy-gradient loss
    ℓ_t = -A·log π(y_t), A = grpo(scale=...) over one group, aggregated with `mode` (autograd).

    Positive: the step raises the token's log-probability; negative: lowers it."""
    mask = lengths_mask(lengths)
    batch = RolloutBatch.from_rewards(rewards, lengths=list(lengths))
    adv = grpo(batch, scale=scale)
    logp = torch.zeros(mask.shape, dtype=torch.float64, requires_grad=True)
    loss = ops.aggregate(-adv * logp, mask, mode, default_denominators(mode, mask, l_max))
    (grad,) = torch.autograd.grad(loss, logp)
    return (-grad.sum(-1) / mask.sum(-1).clamp(min=1)).numpy()


def length_bias_bars(rewards: Sequence[float] = (1, 1, 0, 0), lengths: Sequence[int] = (20, 200, 20, 200),
                     configs: Sequence[tuple[str, str, str]] | None = None, l_max: int | None = None) -> go.Figure:
    """Per-token push (left) and whole-answer push |y|·push (right) on each answer of one group, for each
    (label, aggregation mode, grpo scale) in `configs` (default: the four modes with GRPO's advantage, and
    Dr.GRPO = seq-mean-token-sum-norm with scale="none")."""
    configs = default_bias_configs() if configs is None else list(configs)
    labels = [f"R={r:g}, {n} tok" for r, n in zip(rewards, lengths)]
    if len(set(labels)) < len(labels):  # bars are grouped by category: keep every answer its own
        labels = [f"#{i} {label}" for i, label in enumerate(labels)]
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1, subplot_titles=(
        "per-token push  −∂L/∂log π(y<sub>t</sub>)",
        "whole-answer push  Σ<sub>t</sub> −∂L/∂log π(y<sub>t</sub>)"))
    palette = [MODE_COLORS[m] for m in ops.AGG_MODES] + ["#ff7f0e", "#8c564b", "#7f7f7f"]
    for c, (label, mode, scale) in enumerate(configs):
        push = token_push(rewards, lengths, mode, scale, l_max)
        color = palette[c % len(palette)]
        fig.add_trace(go.Bar(x=labels, y=push, name=label, legendgroup=label, marker_color=color,
                             hovertemplate="%{x}<br>per-token push %{y:.4g}<extra>" + label + "</extra>"),
                      row=1, col=1)
        fig.add_trace(go.Bar(x=labels, y=push * np.asarray(lengths), name=label, legendgroup=label,
                             marker_color=color, showlegend=False,
                             hovertemplate="%{x}<br>answer push %{y:.4g}<extra>" + label + "</extra>"),
                      row=1, col=2)
    fig.update_layout(barmode="group", template="plotly_white", height=460, legend=dict(orientation="h", y=-0.2),
                      title=dict(text="length bias: one group, five ways to turn it into a loss", font=dict(size=14)))
    return fig


# ----------------------------------------------------------------------------------------------------
# Loss aggregation: micro-batches


def microbatch_splits(batch_size: int, k: int) -> list[torch.Tensor]:
    """Row indices of k contiguous micro-batches (sizes differ by at most one, as torch.tensor_split)."""
    if not 1 <= k <= batch_size:
        raise ValueError(f"k must be in 1..{batch_size} (one row per micro-batch at most), got {k}")
    return list(torch.tensor_split(torch.arange(batch_size), k))


def local_denominators(mode: str, mask: torch.Tensor) -> ops.Denominators | None:
    """What a micro-batch knows on its own: its own counts; for seq-mean-token-sum-norm, its own padded size
    C = B_micro * T_micro (T_micro = its longest answer)."""
    if mode != "seq-mean-token-sum-norm":
        return None
    t_micro = int(mask.sum(-1).max())
    return ops.Denominators(norm_constant=float(mask.shape[0] * max(t_micro, 1)))


def accumulated_loss(per_token: torch.Tensor, mask: torch.Tensor, mode: str, k: int, scope: str,
                     l_max: int | None = None) -> torch.Tensor:
    """The loss a gradient-accumulation loop over k micro-batches backpropagates (sum over micro-batches).

    scope "full": one batch, no split. "local": each micro-batch divides by its own counts and the loop
    divides by k (the usual `loss / grad_accum_steps`). "global": each micro-batch divides by the counts
    of the whole step, `Denominators.of(full mask, C = B * L_max)`, and nothing is divided by k.
    """
    if scope == "full":
        return ops.aggregate(per_token, mask, mode, default_denominators(mode, mask, l_max))
    l_max = mask.shape[-1] if l_max is None else l_max
    global_denom = ops.Denominators.of(mask, norm_constant=float(mask.shape[0] * l_max))
    total = per_token.new_zeros(())
    for rows in microbatch_splits(mask.shape[0], k):
        m, x = mask[rows], per_token[rows]
        if scope == "local":
            total = total + ops.aggregate(x, m, mode, local_denominators(mode, m)) / k
        elif scope == "global":
            total = total + ops.aggregate(x, m, mode, global_denom)
        else:
            raise ValueError(f"scope must be 'full', 'local' or 'global', got {scope!r}")
    return total


def microbatch_token_weights(lengths: Sequence[int], k: int, mode: str, scope: str,
                             l_max: int | None = None) -> np.ndarray:
    """[B] per-token weight of each answer when the step is split into k micro-batches (autograd)."""
    mask = lengths_mask(lengths)
    per_token = torch.zeros(mask.shape, dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(accumulated_loss(per_token, mask, mode, k, scope, l_max), per_token)
    return (grad.sum(-1) / mask.sum(-1).clamp(min=1)).numpy()


def toy_gradient(lengths: Sequence[int], k: int, mode: str, scope: str, l_max: int | None = None,
                 dim: int = 8, seed: int = 0) -> np.ndarray:
    """Gradient of the accumulated loss w.r.t. θ of a linear toy model ℓ_{i,t} = x_{i,t}·θ (x ~ N(0, 1),
    seeded), so that a mismatch of per-token weights shows up as a mismatch of a parameter gradient."""
    mask = lengths_mask(lengths)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(*mask.shape, dim, generator=gen, dtype=torch.float64)
    theta = torch.zeros(dim, dtype=torch.float64, requires_grad=True)
    per_token = x @ theta
    (grad,) = torch.autograd.grad(accumulated_loss(per_token, mask, mode, k, scope, l_max), theta)
    return grad.numpy()


def microbatch_mismatch(lengths: Sequence[int] = (12, 300, 40, 25, 800, 60, 150, 5),
                        ks: Sequence[int] = (1, 2, 3, 4, 5, 6, 8), l_max: int | None = None,
                        seed: int = 0) -> go.Figure:
    """Relative gradient error ‖g_k − g_full‖ / ‖g_full‖ of k-micro-batch accumulation against the full
    batch, for each mode, with local (solid) and global `Denominators` (dashed, exactly 0)."""
    ks = [int(k) for k in ks]
    fig = go.Figure()
    for mode in ops.AGG_MODES:
        full = toy_gradient(lengths, 1, mode, "full", l_max, seed=seed)
        for scope, dash in (("local", "solid"), ("global", "dash")):
            errors = [float(np.linalg.norm(toy_gradient(lengths, k, mode, scope, l_max, seed=seed) - full)
                            / np.linalg.norm(full)) for k in ks]
            fig.add_trace(go.Scatter(
                x=ks, y=errors, name=f"{mode} ({scope})", legendgroup=mode, mode="lines+markers",
                line=dict(color=MODE_COLORS[mode], dash=dash),
                hovertemplate="k = %{x}<br>relative error %{y:.3g}<extra>" + f"{mode} ({scope})</extra>"))
    fig.update_layout(template="plotly_white", height=440, xaxis_title="micro-batches k",
                      yaxis_title="‖g_k − g_full‖ / ‖g_full‖", legend=dict(orientation="h", y=-0.25),
                      title=dict(text=f"gradient accumulation over k micro-batches<br><sup>answer lengths "
                                      f"{list(lengths)}; dashed: global Denominators</sup>", font=dict(size=14)))
    fig.update_xaxes(tickvals=ks)
    return fig


def microbatch_weights(lengths: Sequence[int] = (12, 300, 40, 25, 800, 60, 150, 5), k: int = 2,
                       l_max: int | None = None) -> go.Figure:
    """Per-token weight of each answer: full batch vs k micro-batches with local or global denominators,
    one subplot per mode (log y). The global bars always equal the full-batch bars."""
    k = int(k)
    splits = microbatch_splits(len(lengths), k)
    micro_of = {int(r): j for j, rows in enumerate(splits) for r in rows}
    labels = [f"#{i} mb{micro_of[i]} ({n})" for i, n in enumerate(lengths)]
    fig = make_subplots(rows=2, cols=2, subplot_titles=list(ops.AGG_MODES), vertical_spacing=0.22,
                        horizontal_spacing=0.08)
    colors = {"full": "#7f7f7f", "local": "#d62728", "global": "#1f77b4"}
    for m, mode in enumerate(ops.AGG_MODES):
        drawn = []
        for scope in ("full", "local", "global"):
            w = microbatch_token_weights(lengths, k, mode, scope, l_max)
            drawn.append(w)
            fig.add_trace(go.Bar(x=labels, y=w, name=scope, legendgroup=scope, showlegend=m == 0,
                                 marker_color=colors[scope],
                                 hovertemplate="%{x}<br>w = %{y:.4g}<extra>" + f"{mode}, {scope}</extra>"),
                          row=m // 2 + 1, col=m % 2 + 1)
        # plotly's own ticks on a log axis spanning about a decade crowd its minor labels
        fig.update_yaxes(type="log", tickvals=log_tickvals(drawn), tickformat="~g", row=m // 2 + 1, col=m % 2 + 1)
    fig.update_xaxes(tickfont=dict(size=9))
    fig.update_layout(barmode="group", template="plotly_white", height=620, title=dict(
        text=f"per-token weight with k = {k} micro-batches<br><sup>x: answer #, its micro-batch, its length</sup>",
        font=dict(size=14)))
    return fig
