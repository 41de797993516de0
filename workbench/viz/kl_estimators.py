"""KL estimators and the adaptive KL controller (notebook 03). Pure functions: numbers in, `go.Figure` out.

On a categorical toy (π and π_ref over V tokens): each estimator's Monte Carlo mean, exact bias and per-sample spread
against the exact KL as π moves away from π_ref, its per-token values, and the expected gradient of each estimator
used as a loss against ∇KL; then the β an `AdaptiveKLController` sets per step. Estimator values come from
`kl.estimate`, gradients from autograd, β from the controller itself. The helpers that compute those numbers are
public, so a notebook can print what a figure draws.

    from workbench.viz.kl_estimators import kl_estimator_sweep, kl_gradient_check, adaptive_kl_trajectories
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from workbench import kl
from workbench.controllers.adaptive_kl import AdaptiveKLController

ESTIMATOR_COLORS = {"k1": "#1f77b4", "k2": "#ff7f0e", "k3": "#2ca02c", "abs": "#9467bd",
                    "k1+": "#17becf", "k3+": "#8c564b", "abs+": "#e377c2"}
EXACT_COLOR = "#222222"
ESTIMATORS = ("k1", "k2", "k3", "abs")


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
