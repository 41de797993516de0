"""Figures for the math notebooks: loss aggregation (02) and KL estimators (03). Pure functions: numbers in,
`go.Figure` out.

Every plotted number comes from the library itself: per-token weights are autograd gradients through
`ops.aggregate`, estimator values come from `kl.estimate`, β trajectories from `AdaptiveKLController`.
The helpers that compute those numbers are public, so a notebook can print what a figure draws.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from workbench import kl, ops
from workbench.advantages.group import grpo
from workbench.batch import RolloutBatch
from workbench.controllers.adaptive_kl import AdaptiveKLController
from workbench.viz.figures import log_tickvals

MODE_COLORS = {
    "token-mean": "#1f77b4",
    "seq-mean-token-mean": "#d62728",
    "seq-mean-token-sum": "#2ca02c",
    "seq-mean-token-sum-norm": "#9467bd",
}
ESTIMATOR_COLORS = {"k1": "#1f77b4", "k2": "#ff7f0e", "k3": "#2ca02c", "abs": "#9467bd",
                    "k1+": "#17becf", "k3+": "#8c564b", "abs+": "#e377c2"}
EXACT_COLOR = "#222222"
ESTIMATORS = ("k1", "k2", "k3", "abs")


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


def token_weights(mask: torch.Tensor, mode: str, denom: ops.Denominators | None = None) -> torch.Tensor:
    """[B, T] dL/dℓ_{i,t} of L = aggregate(ℓ, mask, mode, denom), by autograd (0 on masked-out tokens).

    The aggregation is linear in ℓ, so this weight is the factor by which a token's own gradient enters
    the step's gradient, whatever the per-token loss is.
    """
    per_token = torch.zeros(mask.shape, dtype=torch.float64, requires_grad=True)
    loss = ops.aggregate(per_token, mask.double(), mode, denom)
    (grad,) = torch.autograd.grad(loss, per_token)
    return grad


def sequence_weights(lengths: Sequence[int], mode: str, l_max: int | None = None) -> np.ndarray:
    """[B] per-token weight of each answer's tokens (all tokens of one answer weigh the same) in one batch.

    l_max: the generation cap L_max used for seq-mean-token-sum-norm's C = B * L_max (default: longest answer).
    """
    mask = lengths_mask(lengths)
    weights = token_weights(mask, mode, default_denominators(mode, mask, l_max))
    return (weights.sum(-1) / mask.sum(-1).clamp(min=1)).numpy()


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


# ----------------------------------------------------------------------------------------------------
# KL estimators on a categorical toy


def categorical_pair(distance: float, vocab: int = 8, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(log π, log π_ref) [V] float64: π_ref = softmax(z), π = softmax(z + distance·d), z and d ~ N(0, 1)
    seeded. distance = 0 gives π = π_ref; KL(π‖π_ref) grows with distance."""
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(vocab, generator=gen, dtype=torch.float64)
    d = torch.randn(vocab, generator=gen, dtype=torch.float64)
    return torch.log_softmax(z + distance * d, -1), torch.log_softmax(z, -1)


def exact_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> float:
    """KL(π‖π_ref) = Σ_y π(y) (log π(y) − log π_ref(y)), summed over the vocabulary."""
    return float((logp.exp() * (logp - ref_logp)).sum())


def estimator_moments(logp: torch.Tensor, ref_logp: torch.Tensor, kind: str) -> tuple[float, float]:
    """Exact (mean, per-sample std) of the estimator `kind` under y ~ π, by summing over the vocabulary."""
    p = logp.exp()
    values = kl.estimate(logp, ref_logp, kind)
    mean = (p * values).sum()
    return float(mean), float((p * (values - mean) ** 2).sum().sqrt())


def sample_estimates(logp: torch.Tensor, ref_logp: torch.Tensor, n_samples: int, seed: int = 0,
                     kinds: Sequence[str] = ESTIMATORS) -> dict[str, np.ndarray]:
    """{kind: [n_samples] per-token estimates} on tokens y ~ π (seeded), from `kl.estimate`."""
    gen = torch.Generator().manual_seed(seed)
    y = torch.multinomial(logp.exp(), n_samples, replacement=True, generator=gen)
    return {kind: kl.estimate(logp[y], ref_logp[y], kind).numpy() for kind in kinds}


def default_distances() -> np.ndarray:
    return np.round(np.linspace(0.0, 3.0, 13), 6)


def kl_estimator_sweep(distances: Sequence[float] | None = None, vocab: int = 8, n_samples: int = 256,
                       seed: int = 0, kinds: Sequence[str] = ESTIMATORS) -> go.Figure:
    """As π moves away from π_ref: (1) exact KL and the Monte Carlo mean of each estimator over n_samples
    tokens y ~ π (error bars: ± one standard error); (2) bias E_π[k] − KL; (3) per-sample std of k.
    Panels 2 and 3 are exact (sums over the vocabulary)."""
    distances = default_distances() if distances is None else np.asarray(distances, dtype=float)
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.07, subplot_titles=(
        f"mean of {n_samples} samples", "bias  E<sub>π</sub>[k] − KL", "per-sample std of k"))
    pairs = [categorical_pair(float(d), vocab, seed) for d in distances]
    exact = [exact_kl(lp, lr) for lp, lr in pairs]
    fig.add_trace(go.Scatter(x=distances, y=exact, name="exact KL(π‖π_ref)", mode="lines",
                             line=dict(color=EXACT_COLOR, width=3)), row=1, col=1)
    for kind in kinds:
        color = ESTIMATOR_COLORS.get(kind, "#7f7f7f")
        samples = [sample_estimates(lp, lr, n_samples, seed + 1 + i, (kind,))[kind] for i, (lp, lr) in enumerate(pairs)]
        mc_mean = [float(s.mean()) for s in samples]
        mc_err = [float(s.std(ddof=1) / np.sqrt(len(s))) if len(s) > 1 else 0.0 for s in samples]
        moments = [estimator_moments(lp, lr, kind) for lp, lr in pairs]
        fig.add_trace(go.Scatter(x=distances, y=mc_mean, error_y=dict(type="data", array=mc_err, visible=True),
                                 name=kind, legendgroup=kind, mode="markers+lines", line=dict(color=color, width=1),
                                 hovertemplate="distance %{x}<br>MC mean %{y:.4g}<extra>" + kind + "</extra>"),
                      row=1, col=1)
        fig.add_trace(go.Scatter(x=distances, y=[m - e for (m, _), e in zip(moments, exact)], name=kind,
                                 legendgroup=kind, showlegend=False, mode="lines+markers", line=dict(color=color),
                                 hovertemplate="distance %{x}<br>bias %{y:.4g}<extra>" + kind + "</extra>"),
                      row=1, col=2)
        fig.add_trace(go.Scatter(x=distances, y=[s for _, s in moments], name=kind, legendgroup=kind,
                                 showlegend=False, mode="lines+markers", line=dict(color=color),
                                 hovertemplate="distance %{x}<br>std %{y:.4g}<extra>" + kind + "</extra>"),
                      row=1, col=3)
    fig.update_xaxes(title_text="distance of π from π_ref")
    fig.update_layout(template="plotly_white", height=430, legend=dict(orientation="h", y=-0.25),
                      title=dict(text=f"KL estimators on a categorical with V = {vocab}<br><sup>left: each "
                                      f"estimator's Monte Carlo mean over {n_samples} tokens y ~ π (± one standard "
                                      "error) against the exact KL</sup>", font=dict(size=14)))
    return fig


def kl_estimator_histograms(distance: float = 1.5, vocab: int = 8, n_samples: int = 2000, seed: int = 0,
                            kinds: Sequence[str] = ESTIMATORS) -> go.Figure:
    """Histogram of the per-token values of each estimator over n_samples tokens y ~ π, one subplot each;
    dashed line: exact KL, dotted: the sample mean. With V tokens each histogram has at most V spikes."""
    logp, ref_logp = categorical_pair(distance, vocab, seed)
    exact = exact_kl(logp, ref_logp)
    values = sample_estimates(logp, ref_logp, n_samples, seed + 1, kinds)
    cols = 2
    rows = (len(kinds) + cols - 1) // cols
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=list(kinds), vertical_spacing=0.18)
    shapes = []
    for i, kind in enumerate(kinds):
        r, c = i // cols + 1, i % cols + 1
        fig.add_trace(go.Histogram(x=values[kind], name=kind, nbinsx=60, histnorm="probability",
                                   marker_color=ESTIMATOR_COLORS.get(kind, "#7f7f7f"), showlegend=False,
                                   hovertemplate="value %{x}<br>fraction %{y:.3f}<extra>" + kind + "</extra>"),
                      row=r, col=c)
        axis = "" if i == 0 else str(i + 1)
        for x, dash, color in ((exact, "dash", EXACT_COLOR), (float(values[kind].mean()), "dot", "#d62728")):
            shapes.append(dict(type="line", x0=x, x1=x, xref=f"x{axis}", y0=0, y1=1, yref=f"y{axis} domain",
                               line=dict(color=color, dash=dash, width=2)))
    fig.update_xaxes(title_text="per-token value")
    fig.update_layout(template="plotly_white", height=300 * rows + 80, shapes=shapes,
                      title=dict(text=f"estimator values on {n_samples} tokens y ~ π (V = {vocab}, KL = {exact:.3f})"
                                      "<br><sup>dashed: exact KL, dotted: sample mean</sup>", font=dict(size=14)))
    return fig


def kl_gradients(distance: float, vocab: int = 8, seed: int = 0,
                 kinds: Sequence[str] = ("k1", "k2", "k3", "abs", "k3+")) -> dict[str, np.ndarray]:
    """Exact gradients w.r.t. the logits θ of π = softmax(θ), [V] each, summed over the vocabulary:

    "reverse KL": ∇ KL(π‖π_ref); "forward KL": ∇ KL(π_ref‖π); and for each estimator the expected
    gradient of it used as a loss on-policy, ∇ Σ_y sg(π(y)) k(log π(y), log π_ref(y)) = E_{y~π}[∇ k].
    """
    logp0, ref_logp = categorical_pair(distance, vocab, seed)
    out = {}

    def grad_of(fn) -> np.ndarray:
        theta = logp0.clone().requires_grad_(True)
        logp = torch.log_softmax(theta, -1)
        (g,) = torch.autograd.grad(fn(logp), theta)
        return g.numpy()

    out["reverse KL"] = grad_of(lambda lp: (lp.exp() * (lp - ref_logp)).sum())
    out["forward KL"] = grad_of(lambda lp: (ref_logp.exp() * (ref_logp - lp)).sum())
    weights = logp0.exp()
    for kind in kinds:
        out[kind] = grad_of(lambda lp, kind=kind: (weights * kl.estimate(lp, ref_logp, kind)).sum())
    return out


def gradient_error(grads: Mapping[str, np.ndarray], kind: str, target: str = "reverse KL") -> float:
    """‖E∇k − ∇target‖ / ‖∇target‖."""
    return float(np.linalg.norm(grads[kind] - grads[target]) / np.linalg.norm(grads[target]))


def kl_gradient_check(distance: float = 1.5, vocab: int = 8, seed: int = 0,
                      kinds: Sequence[str] = ("k1", "k2", "k3", "abs", "k3+"),
                      distances: Sequence[float] | None = None) -> go.Figure:
    """Left: per logit θ_j, the exact ∇KL(π‖π_ref) (black), the expected gradient of each estimator used as
    a loss (bars) and ∇KL(π_ref‖π) (crosses). Right: relative error ‖E∇k − ∇KL‖ / ‖∇KL‖ against
    the distance of π from π_ref (distances > 0). All expectations are exact sums over the vocabulary."""
    distances = default_distances()[1:] if distances is None else np.asarray(distances, dtype=float)
    if bool((distances <= 0).any()):
        raise ValueError("distances must be > 0: at π = π_ref the KL gradient is 0 and the relative error undefined")
    grads = kl_gradients(distance, vocab, seed, kinds)
    tokens = [f"y={j}" for j in range(vocab)]
    fig = make_subplots(rows=1, cols=2, column_widths=[0.6, 0.4], horizontal_spacing=0.08, subplot_titles=(
        f"∂/∂θ<sub>j</sub> at distance {distance:g}", "relative error vs ∇KL(π‖π_ref)"))
    fig.add_trace(go.Bar(x=tokens, y=grads["reverse KL"], name="exact ∇KL(π‖π_ref)", marker_color=EXACT_COLOR),
                  row=1, col=1)
    for kind in kinds:
        color = ESTIMATOR_COLORS.get(kind, "#7f7f7f")
        fig.add_trace(go.Bar(x=tokens, y=grads[kind], name=f"E[∇{kind}]", legendgroup=kind, marker_color=color),
                      row=1, col=1)
    fig.add_trace(go.Scatter(x=tokens, y=grads["forward KL"], name="∇KL(π_ref‖π)", mode="markers",
                             marker=dict(symbol="x", size=10, color="#d62728")), row=1, col=1)
    sweep = [kl_gradients(float(d), vocab, seed, kinds) for d in distances]
    for kind in kinds:
        fig.add_trace(go.Scatter(x=distances, y=[gradient_error(g, kind) for g in sweep], name=f"E[∇{kind}]",
                                 legendgroup=kind, showlegend=False, mode="lines+markers",
                                 line=dict(color=ESTIMATOR_COLORS.get(kind, "#7f7f7f")),
                                 hovertemplate="distance %{x}<br>relative error %{y:.3g}<extra>" + kind + "</extra>"),
                      row=1, col=2)
    fig.update_xaxes(title_text="logit θ_j of token j", row=1, col=1)
    fig.update_xaxes(title_text="distance of π from π_ref", row=1, col=2)
    fig.update_layout(barmode="group", template="plotly_white", height=440, legend=dict(orientation="h", y=-0.25),
                      title=dict(text=f"gradient of each estimator used as a loss, on-policy (V = {vocab})",
                                 font=dict(size=14)))
    return fig


# ----------------------------------------------------------------------------------------------------
# The adaptive KL controller


def beta_trajectory(kl_values, beta: float, target: float, horizon: int, n_steps: int,
                    steps: int | None = None) -> tuple[list[float], list[float]]:
    """(KL seen at each step, β used at each step) of an `AdaptiveKLController`.

    kl_values: a sequence (one KL per step) or a callable beta -> KL (a toy policy whose KL responds to
    the current β). Step t uses β_t, observes KL_t, then calls update(KL_t, n_steps)."""
    controller = AdaptiveKLController(beta=beta, target=target, horizon=horizon)
    if callable(kl_values):
        if steps is None:
            raise ValueError("steps is required when kl_values is a callable")
        n = int(steps)
    else:
        kl_values = [float(v) for v in kl_values]
        n = len(kl_values) if steps is None else min(int(steps), len(kl_values))
    kls, betas = [], []
    for t in range(n):
        b = controller.beta
        value = float(kl_values(b)) if callable(kl_values) else kl_values[t]
        kls.append(value)
        betas.append(b)
        controller.update(value, n_steps)
    return kls, betas


def adaptive_kl_trajectories(scenarios: Mapping[str, Sequence[float] | Callable[[float], float]],
                             beta: float = 0.1, target: float = 6.0, horizon: int = 10000, n_steps: int = 256,
                             steps: int = 300) -> go.Figure:
    """KL (left) and β (right) per step for each scenario, adaptive controller (solid) vs the fixed
    controller (β constant, dashed grey). Dotted line: the KL target."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1, subplot_titles=("KL per step", "β per step"))
    palette = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e"]
    for i, (name, values) in enumerate(scenarios.items()):
        kls, betas = beta_trajectory(values, beta, target, horizon, n_steps, steps)
        color = palette[i % len(palette)]
        x = list(range(len(kls)))
        fig.add_trace(go.Scatter(x=x, y=kls, name=name, legendgroup=name, line=dict(color=color)), row=1, col=1)
        fig.add_trace(go.Scatter(x=x, y=betas, name=name, legendgroup=name, showlegend=False,
                                 line=dict(color=color)), row=1, col=2)
    fig.add_trace(go.Scatter(x=[0, steps - 1], y=[beta, beta], name="fixed controller", mode="lines",
                             line=dict(color="#7f7f7f", dash="dash")), row=1, col=2)
    fig.add_trace(go.Scatter(x=[0, steps - 1], y=[target, target], name="KL target", mode="lines",
                             line=dict(color=EXACT_COLOR, dash="dot")), row=1, col=1)
    fig.update_xaxes(title_text="step")
    fig.update_yaxes(type="log", row=1, col=2)
    fig.update_layout(template="plotly_white", height=420, legend=dict(orientation="h", y=-0.25),
                      title=dict(text=f"adaptive KL controller: β₀ = {beta:g}, target {target:g}<br><sup>horizon "
                                      f"{horizon}, n_steps {n_steps} per update</sup>", font=dict(size=14)))
    return fig
