"""Figures for the preference-optimization notebook (08). Pure functions: numbers in, `go.Figure` out.

Every plotted number comes from the library itself: losses and gradient weights are autograd derivatives
through the registered preference objectives (`registry.get("preference", key).fn`), exploitability and
equilibria come from `workbench.preference.games`, training curves from the rows a run logged. The helpers
that compute those numbers are public, so a notebook (or a test) can print what a figure draws.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from workbench import registry
from workbench.preference import games

D = torch.float64
PAIRWISE_LOSSES = ("dpo", "ipo", "cdpo-robust", "hinge", "simpo")
LOSS_COLORS = {"dpo": "#1f77b4", "ipo": "#ff7f0e", "cdpo-robust": "#2ca02c", "hinge": "#d62728",
               "simpo": "#9467bd"}
CHOSEN, REJECTED, MARGIN = "#1f77b4", "#d62728", "#2ca02c"


# ----------------------------------------------------------------------------------------------------
# 1. Loss and gradient weight of each pairwise loss vs the implicit reward margin


def loss_kwargs(key: str, beta: float, gamma_beta_ratio: float = 0.5, label_smoothing: float = 0.1) -> dict:
    """Hyper-parameters passed to `key` in `margin_curves`: β for all; SimPO's γ' and cDPO's ε where they apply."""
    kw = {"beta": float(beta)}
    if key == "simpo":
        kw["gamma_beta_ratio"] = float(gamma_beta_ratio)
    if key == "cdpo-robust":
        kw["label_smoothing"] = float(label_smoothing)
    return kw


def pair_loss_and_weight(key: str, delta: float, **kw) -> tuple[float, float]:
    """(L, −∂L/∂Δ) of ONE pair whose log-ratio margin is Δ, by autograd through the registered loss.

    Inputs: chosen_logp = Δ, rejected_logp = 0 and reference log-probs 0, so u_w − u_l = Δ. SimPO reads no
    reference: with chosen_len = rejected_len = 1 its length-averaged margin Δ̄ equals Δ as well.
    """
    chosen = torch.tensor([float(delta)], dtype=D, requires_grad=True)
    zero = torch.zeros(1, dtype=D)
    extra = {"chosen_len": torch.ones(1, dtype=D), "rejected_len": torch.ones(1, dtype=D)} if key == "simpo" else {}
    loss, _ = registry.get("preference", key).fn(chosen, zero, zero, zero, **kw, **extra)
    (grad,) = torch.autograd.grad(loss, chosen)
    return float(loss.detach()), -float(grad[0])


def target_margin(key: str, beta: float, gamma_beta_ratio: float = 0.5, label_smoothing: float = 0.1):
    """Implicit reward margin m = βΔ where the loss stops pushing (its gradient weight is zero), or, for SimPO,
    its margin γ = βγ' (the centre of its sigmoid); None for DPO (it pushes towards +∞)."""
    if key == "ipo":
        return 0.5
    if key == "hinge":
        return 1.0
    if key == "cdpo-robust":
        eps = float(label_smoothing)
        return math.log((1 - eps) / eps) if 0 < eps < 0.5 else None
    if key == "simpo":
        return float(beta) * float(gamma_beta_ratio)
    return None


def margin_curves(beta: float = 0.1, gamma_beta_ratio: float = 0.5, label_smoothing: float = 0.1,
                  margins: Sequence[float] | None = None, losses: Sequence[str] = PAIRWISE_LOSSES
                  ) -> dict[str, dict[str, np.ndarray]]:
    """Per loss: {"m": implicit reward margins, "delta": Δ = m/β, "loss": L, "weight": −∂L/∂Δ} on a grid of m.

    m = r̂(y_w) − r̂(y_l) with r̂ = β log π/π_ref (SimPO: β log π / |y|); default grid −6..6 (241 points).
    """
    m = np.linspace(-6.0, 6.0, 241) if margins is None else np.asarray(margins, dtype=float)
    out = {}
    for key in losses:
        kw = loss_kwargs(key, beta, gamma_beta_ratio, label_smoothing)
        values = np.array([pair_loss_and_weight(key, x / beta, **kw) for x in m])
        out[key] = {"m": m, "delta": m / beta, "loss": values[:, 0], "weight": values[:, 1]}
    return out


def margin_figure(beta: float = 0.1, gamma_beta_ratio: float = 0.5, label_smoothing: float = 0.1,
                  margins: Sequence[float] | None = None, losses: Sequence[str] = PAIRWISE_LOSSES) -> go.Figure:
    """Top row: each loss L vs the implicit reward margin m; bottom row: its per-pair gradient weight −∂L/∂Δ.

    One column per loss (each with its own y scale: IPO's weight is ~1/β, DPO's at most β). A dotted line marks
    where the loss stops pushing (IPO 1/2, hinge 1, cDPO log((1−ε)/ε)) or SimPO's margin γ.
    """
    curves = margin_curves(beta, gamma_beta_ratio, label_smoothing, margins, losses)
    titles = [f"{key}" + (f" (ε={label_smoothing:g})" if key == "cdpo-robust" else "")
              + (f" (γ'={gamma_beta_ratio:g})" if key == "simpo" else "") for key in losses]
    fig = make_subplots(rows=2, cols=len(losses), subplot_titles=titles, horizontal_spacing=0.05,
                        vertical_spacing=0.12)
    for c, key in enumerate(losses, start=1):
        cur, color = curves[key], LOSS_COLORS.get(key, "#333333")
        for r, (field, label) in enumerate((("loss", "loss"), ("weight", "gradient weight")), start=1):
            fig.add_trace(go.Scatter(
                x=cur["m"], y=cur[field], mode="lines", name=key, legendgroup=key, showlegend=False,
                line=dict(color=color), customdata=cur["delta"],
                hovertemplate=f"{key}<br>m = βΔ %{{x:.3g}}<br>Δ %{{customdata:.3g}}<br>{label} %{{y:.4g}}"
                              "<extra></extra>"), row=r, col=c)
            target = target_margin(key, beta, gamma_beta_ratio, label_smoothing)
            if target is not None:
                fig.add_vline(x=target, line=dict(color="#555555", dash="dot", width=1), row=r, col=c)
        fig.add_hline(y=0, line=dict(color="#bbbbbb", width=1), row=2, col=c)
        fig.update_xaxes(title_text="m = βΔ", row=2, col=c)
    fig.update_yaxes(title_text="loss L", row=1, col=1)
    fig.update_yaxes(title_text="−∂L/∂Δ", row=2, col=1)
    fig.update_layout(title=f"loss and gradient weight vs the implicit reward margin (β = {beta:g})",
                      template="plotly_white", height=520, margin=dict(t=90))
    return fig


# ----------------------------------------------------------------------------------------------------
# 2. Why chosen and rejected log-probs both fall


def logp_trajectories(rows: Sequence[Mapping], title: str | None = None) -> go.Figure:
    """Left: logps/chosen and logps/rejected (summed policy log-probs of the step's pairs); right:
    rewards/chosen, rewards/rejected and rewards/margins (β·log π/π_ref), per step, from a run's metric rows."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("policy log-probs of the step's pairs",
                                                        "implicit rewards β log π/π_ref"),
                        horizontal_spacing=0.1)
    panels = ((1, (("logps/chosen", CHOSEN, "solid"), ("logps/rejected", REJECTED, "solid"))),
              (2, (("rewards/chosen", CHOSEN, "solid"), ("rewards/rejected", REJECTED, "solid"),
                   ("rewards/margins", MARGIN, "dash"))))
    for col, keys in panels:
        for key, color, dash in keys:
            pts = [(r["step"], float(r[key])) for r in rows if r.get(key) is not None]
            if not pts:
                continue
            xs, ys = zip(*pts)
            fig.add_trace(go.Scatter(x=list(xs), y=list(ys), mode="lines+markers", name=key,
                                     line=dict(color=color, dash=dash), marker=dict(size=4)), row=1, col=col)
        fig.update_xaxes(title_text="step", row=1, col=col)
    fig.add_hline(y=0, line=dict(color="#bbbbbb", width=1), row=1, col=2)
    fig.update_yaxes(title_text="summed log-prob (nats)", row=1, col=1)
    fig.update_layout(title=title or "DPO on the tiny model: chosen and rejected", template="plotly_white",
                      height=400)
    return fig


def logp_change_scatter(chosen_before, rejected_before, chosen_after, rejected_after,
                        title: str | None = None) -> go.Figure:
    """Per held-out pair: change of log π(y_w) (x) vs change of log π(y_l) (y) between two checkpoints.

    Points left of x = 0 are pairs whose chosen answer lost probability; below the diagonal, the margin grew.
    """
    dw = np.asarray(chosen_after, dtype=float) - np.asarray(chosen_before, dtype=float)
    dl = np.asarray(rejected_after, dtype=float) - np.asarray(rejected_before, dtype=float)
    lo = float(min(dw.min(), dl.min(), 0.0)) - 0.5
    hi = float(max(dw.max(), dl.max(), 0.0)) + 0.5
    n = len(dw)
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", name="margin unchanged",
                             line=dict(color="#999999", dash="dot"), hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=dw, y=dl, mode="markers", name="held-out pair", marker=dict(color=CHOSEN, size=7,
                                                                                          opacity=0.7),
                             hovertemplate="Δ log π(y_w) %{x:.3g}<br>Δ log π(y_l) %{y:.3g}<extra></extra>"))
    fig.add_vline(x=0, line=dict(color="#555555", width=1))
    fig.add_hline(y=0, line=dict(color="#555555", width=1))
    fig.add_annotation(x=0.01, y=0.99, xref="paper", yref="paper", showarrow=False, xanchor="left", yanchor="top",
                       text=f"chosen fell: {int((dw < 0).sum())}/{n}<br>rejected fell: {int((dl < 0).sum())}/{n}"
                            f"<br>margin grew: {int((dw - dl > 0).sum())}/{n}",
                       align="left", bgcolor="rgba(255,255,255,0.8)")
    fig.update_layout(title=title or "change of each held-out pair's log-probs over the run",
                      xaxis_title="Δ log π(y_w)  (chosen)", yaxis_title="Δ log π(y_l)  (rejected)",
                      template="plotly_white", height=450, width=560, showlegend=False,
                      yaxis=dict(scaleanchor="x", scaleratio=1))
    return fig


# ----------------------------------------------------------------------------------------------------
# 3. Length: per-token gradients of a long chosen answer

LENGTH_LOSSES: dict[str, tuple[str, dict]] = {
    "dpo (summed)": ("dpo", {"beta": 0.1}),
    "ipo (summed)": ("ipo", {"beta": 0.1}),
    "ipo (length-averaged, TRL)": ("ipo", {"beta": 0.1, "length_average": True}),
    "simpo (length-normalized)": ("simpo", {"beta": 2.0, "gamma_beta_ratio": 0.5}),
}
LENGTH_COLORS = {"dpo (summed)": "#1f77b4", "ipo (summed)": "#ff7f0e", "ipo (length-averaged, TRL)": "#8c564b",
                 "simpo (length-normalized)": "#9467bd"}


def length_pair(key: str, kw: Mapping, chosen_len: int, rejected_len: int, token_logratio: float = 0.0,
                token_logp: float = -1.0) -> dict[str, float]:
    """One pair whose answers have the same per-token quality: every token has log π = `token_logp` and
    log π − log π_ref = `token_logratio`. Returns, by autograd through the registered loss with the token
    log-probs as leaves, the gradient weight −∂L/∂(log π of one chosen token) (`token_weight`), its sum over
    the chosen answer (`answer_weight`), the same for a rejected token (`rejected_token_weight`, the push
    DOWN, so positive) and β × the margin the loss reads (`reward_margin`: β·Δ summed, β·Δ̄ averaged)."""
    tok_w = torch.full((chosen_len,), float(token_logp), dtype=D, requires_grad=True)
    tok_l = torch.full((rejected_len,), float(token_logp), dtype=D, requires_grad=True)
    chosen, rejected = tok_w.sum().view(1), tok_l.sum().view(1)
    ref_w = torch.tensor([chosen_len * (token_logp - token_logratio)], dtype=D)
    ref_l = torch.tensor([rejected_len * (token_logp - token_logratio)], dtype=D)
    lengths = {"chosen_len": torch.tensor([float(chosen_len)], dtype=D),
               "rejected_len": torch.tensor([float(rejected_len)], dtype=D)}
    needs_len = key == "simpo" or bool(kw.get("length_average"))
    loss, metrics = registry.get("preference", key).fn(chosen, rejected, ref_w, ref_l, **kw,
                                                       **(lengths if needs_len else {}))
    g_w, g_l = torch.autograd.grad(loss, (tok_w, tok_l))
    beta = float(kw["beta"])
    margin = metrics["ipo/margin"] * beta if key == "ipo" else metrics["rewards/margins"]
    return {"token_weight": -float(g_w[0]), "answer_weight": -float(g_w.sum()),
            "rejected_token_weight": float(g_l[0]), "reward_margin": float(margin)}


def length_curves(chosen_lengths: Sequence[int] = tuple(range(1, 101)), rejected_len: int = 10,
                  token_logratio: float = 0.05, token_logp: float = -1.0,
                  losses: Mapping[str, tuple[str, dict]] = LENGTH_LOSSES) -> dict[str, dict[str, np.ndarray]]:
    """Per loss label: arrays over `chosen_lengths` of `length_pair`'s fields. The gradient fields are taken at
    the start of training (π = π_ref, token_logratio 0), the reward margin with `token_logratio`."""
    out = {}
    for label, (key, kw) in losses.items():
        start = [length_pair(key, kw, n, rejected_len, 0.0, token_logp) for n in chosen_lengths]
        later = [length_pair(key, kw, n, rejected_len, token_logratio, token_logp) for n in chosen_lengths]
        out[label] = {"n": np.asarray(chosen_lengths, dtype=float),
                      **{f: np.array([p[f] for p in start]) for f in ("token_weight", "answer_weight",
                                                                       "rejected_token_weight")},
                      "reward_margin": np.array([p["reward_margin"] for p in later])}
    return out


def length_gradient_figure(chosen_lengths: Sequence[int] = tuple(range(1, 101)), rejected_len: int = 10,
                  token_logratio: float = 0.05, token_logp: float = -1.0,
                  losses: Mapping[str, tuple[str, dict]] = LENGTH_LOSSES) -> go.Figure:
    """Three panels vs the chosen answer's length (rejected answer: `rejected_len` tokens):
    (1) gradient weight on ONE chosen token and (2) on the whole chosen answer, at π = π_ref; (3) β × the
    margin each loss reads when every token of both answers has log-ratio `token_logratio` (equal quality)."""
    curves = length_curves(chosen_lengths, rejected_len, token_logratio, token_logp, losses)
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.08, subplot_titles=(
        "one chosen token", "whole chosen answer", f"β·margin, log-ratio {token_logratio:g}/token"))
    for label, cur in curves.items():
        color = LENGTH_COLORS.get(label, "#333333")
        for col, field in enumerate(("token_weight", "answer_weight", "reward_margin"), start=1):
            fig.add_trace(go.Scatter(x=cur["n"], y=cur[field], mode="lines", name=label, legendgroup=label,
                                     showlegend=col == 1, line=dict(color=color),
                                     hovertemplate=f"{label}<br>|y_w| %{{x}}<br>%{{y:.4g}}<extra></extra>"),
                          row=1, col=col)
    for col in (1, 2, 3):
        fig.update_xaxes(title_text="chosen length |y_w|", row=1, col=col)
        fig.add_vline(x=rejected_len, line=dict(color="#999999", dash="dot", width=1), row=1, col=col)
    fig.update_yaxes(type="log", title_text="gradient weight (push up)", row=1, col=1)
    fig.update_yaxes(type="log", row=1, col=2)
    fig.update_layout(title=f"length: chosen answer of |y_w| tokens vs a rejected one of {rejected_len}",
                      template="plotly_white", height=430, legend=dict(orientation="h", y=-0.25))
    return fig


# ----------------------------------------------------------------------------------------------------
# 4. Bradley–Terry vs general preferences: exact dynamics on toy games

GAME_METHODS = ("online DPO", "SPPO", "INPO", "Nash-MP")
METHOD_COLORS = {"online DPO": "#1f77b4", "SPPO": "#ff7f0e", "SPPO (average iterate)": "#ff7f0e",
                 "INPO": "#2ca02c", "Nash-MP": "#9467bd"}
RESPONSE_NAMES = ("rock", "paper", "scissors")


def game_dynamics(P, start, steps: int = 30, *, dpo_beta: float = 1.0, sppo_eta: float = 1.0,
                  inpo_eta: float = 0.5, inpo_tau: float = 0.2, nash_mp_beta: float = 0.02,
                  nash_mp_eta: float = 3.0) -> dict[str, torch.Tensor]:
    """[steps + 1, K] iterates of each method's EXACT update through its registered loss
    (`games.dpo_iterate`, `sppo_iterate`, `inpo_iterate`, `nash_mp_iterate`; reference uniform)."""
    updates = {
        "online DPO": lambda p: games.dpo_iterate(P, p, beta=dpo_beta),
        "SPPO": lambda p: games.sppo_iterate(P, p, eta=sppo_eta),
        "INPO": lambda p: games.inpo_iterate(P, p, eta=inpo_eta, tau=inpo_tau),
        "Nash-MP": lambda p: games.nash_mp_iterate(P, p, beta=nash_mp_beta, eta=nash_mp_eta),
    }
    return {name: games.trajectory(step, start, steps) for name, step in updates.items()}


def average_iterates(traj) -> torch.Tensor:
    """Running mean (1/(t+1)) Σ_{s ≤ t} π_s of a [T, K] trajectory."""
    traj = torch.as_tensor(traj, dtype=D)
    return torch.cumsum(traj, 0) / torch.arange(1, traj.shape[0] + 1, dtype=D)[:, None]


def exploitability_curves(P, trajectories: Mapping[str, torch.Tensor], average: Sequence[str] = ("SPPO",)
                          ) -> dict[str, np.ndarray]:
    """Exploitability max_y P(y ≻ π_t) − ½ of every iterate; for the methods in `average` also of the running
    average of the iterates (label "<name> (average iterate)")."""
    out = {}
    for name, traj in trajectories.items():
        out[name] = np.array([games.exploitability(P, p) for p in traj])
        if name in average:
            out[f"{name} (average iterate)"] = np.array([games.exploitability(P, p) for p in average_iterates(traj)])
    return out


def exploitability_figure(game_runs: Mapping[str, tuple], average: Sequence[str] = ("SPPO",)) -> go.Figure:
    """One panel per game: exploitability (log scale) of each method's iterates vs iteration.

    game_runs: game name -> (P, {method: [T, K] iterates}). Methods in `average` are drawn twice: the last
    iterate dotted, the running average of the iterates solid (SPPO's guarantee is for the average).
    """
    fig = make_subplots(rows=1, cols=len(game_runs), subplot_titles=list(game_runs), horizontal_spacing=0.08)
    floor = 1e-6
    for c, (game, (P, trajectories)) in enumerate(game_runs.items(), start=1):
        curves = exploitability_curves(P, trajectories, average)
        for name, ys in curves.items():
            base = name.replace(" (average iterate)", "")
            dotted = base in average and name == base
            label = f"{name} (last iterate)" if dotted else name
            fig.add_trace(go.Scatter(x=np.arange(len(ys)), y=np.maximum(ys, floor), mode="lines+markers",
                                     name=label, legendgroup=label, showlegend=c == 1,
                                     line=dict(color=METHOD_COLORS.get(name, "#333333"),
                                               dash="dot" if dotted else "solid"), marker=dict(size=4),
                                     customdata=ys,
                                     hovertemplate=f"{label}<br>iteration %{{x}}<br>exploitability "
                                                   "%{customdata:.3g}<extra></extra>"), row=1, col=c)
        fig.update_xaxes(title_text="iteration t", row=1, col=c)
        fig.update_yaxes(type="log", dtick="D2", row=1, col=c)
    fig.update_yaxes(title_text="max_y P(y ≻ π_t) − ½", row=1, col=1)
    fig.update_layout(title="exploitability of the iterates (0 exactly at the Nash equilibrium)",
                      template="plotly_white", height=430, legend=dict(orientation="h", y=-0.25))
    return fig


def simplex_figure(game_runs: Mapping[str, tuple],
                   names: Sequence[str] | Mapping[str, Sequence[str]] = RESPONSE_NAMES,
                   average: Sequence[str] = ("SPPO",)) -> go.Figure:
    """One ternary panel per game (K = 3): each method's iterates π_t as a path on the simplex, the exact Nash
    equilibrium (`games.nash_equilibrium`) as a black star. Methods in `average` also show the average path.
    names: the three responses' names, for every game or per game (a mapping game -> names)."""
    fig = make_subplots(rows=1, cols=len(game_runs), subplot_titles=list(game_runs), horizontal_spacing=0.16,
                        specs=[[{"type": "ternary"}] * len(game_runs)])  # room between a c and the next b title
    for c, (game, (P, trajectories)) in enumerate(game_runs.items(), start=1):
        paths = dict(trajectories)
        for name in average:
            if name in trajectories:
                paths[f"{name} (average iterate)"] = average_iterates(trajectories[name])
        for name, traj in paths.items():
            t = np.asarray(torch.as_tensor(traj, dtype=D))
            if t.shape[1] != 3:
                raise ValueError(f"simplex_figure draws K = 3 responses, got K = {t.shape[1]}")
            fig.add_trace(go.Scatterternary(a=t[:, 0], b=t[:, 1], c=t[:, 2], mode="lines+markers", name=name,
                                            legendgroup=name, showlegend=c == 1, marker=dict(size=4),
                                            line=dict(color=METHOD_COLORS.get(name, "#333333"),
                                                      dash="dash" if "average" in name else "solid")),
                          row=1, col=c)
        nash = np.asarray(games.nash_equilibrium(P))
        fig.add_trace(go.Scatterternary(a=[nash[0]], b=[nash[1]], c=[nash[2]], mode="markers", name="Nash",
                                        legendgroup="Nash", showlegend=c == 1,
                                        marker=dict(symbol="star", size=14, color="black")), row=1, col=c)
        labels = names.get(game, RESPONSE_NAMES) if isinstance(names, Mapping) else names
        fig.layout[f"ternary{'' if c == 1 else c}"].update(aaxis_title=labels[0], baxis_title=labels[1],
                                                           caxis_title=labels[2])
    for annotation in fig.layout.annotations:  # lift the game names above the top vertex's axis title
        annotation.y += 0.07
    fig.update_layout(title="the iterates on the simplex", template="plotly_white", height=500,
                      margin=dict(t=120), legend=dict(orientation="h", y=-0.1))
    return fig
