"""Who carries the gradient on a real batch (notebook 10): every token's gradient weight d(-L)/d(log pi_t) under a
registered objective, the share of the gradient carried by A > 0 and A < 0 tokens (BAPO's positive share is the
motivating quantity), and the tokens an objective silences (weight exactly 0). The weight is the objective's own
autograd weight (`workbench.viz.weight_surfaces.gradient_weight`, the same call as the surfaces').

    from workbench.viz.gradient_shares import token_gradient_weights, contribution_summary, contribution_figure
"""
from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from workbench import registry
from workbench.viz.style import NEGATIVE, POSITIVE, to_numpy
from workbench.viz.weight_surfaces import NOT_ON_A_GRID, NotDrawable, gradient_weight, required_inputs


def batch_inputs(key: str, batch) -> dict:
    """The keyword inputs objective `key` reads, taken from a RolloutBatch, with documented fallbacks:
    mu_logp <- batch.mu_logp (else old_logp: no mismatch), entropy <- batch.entropy, target_adv <- batch.target_adv
    (else GBPO's median-centred target advantage of the batch's rewards, `advantages.gbpo.target_advantage`),
    offpolicy_mask <- batch.offpolicy_mask (else 0: every token was sampled by the policy), task_value <-
    batch.task_value (else p(1 - p) of the group's mean score clamped to [0, 1], VSPO's `task_value`)."""
    reads = required_inputs(registry.get("objective", key).fn)
    kw = {}
    for name in reads:
        value = getattr(batch, name, None)
        if value is not None:
            kw[name] = value
        elif name == "mu_logp":
            kw[name] = batch.old_logp
        elif name == "target_adv":
            from workbench.advantages.base import broadcast, sequence_rewards
            from workbench.advantages.gbpo import target_advantage

            kw[name] = broadcast(target_advantage(sequence_rewards(batch), batch.group), batch.mask)
        elif name == "offpolicy_mask":
            kw[name] = torch.zeros_like(batch.mask)
        elif name == "task_value":
            from workbench.advantages.group import group_stats
            from workbench.objectives.vspo import task_value

            scores = (batch.scores if batch.scores is not None else batch.rewards).double()
            p = group_stats(scores, batch.group)[0].clamp(0.0, 1.0)
            kw[name] = task_value(p).to(batch.mask.dtype)
        else:
            raise NotDrawable(f"{key} needs {NOT_ON_A_GRID.get(name, repr(name))}; a RolloutBatch alone has no "
                              f"{name!r}")
    return kw


def token_gradient_weights(key: str, batch, logp: torch.Tensor, **hp) -> tuple[np.ndarray, dict]:
    """(w [B, T], metrics): every token's gradient weight d(-L)/d(log pi_t) under objective `key` when the policy's
    log-probs of the batch's tokens are `logp` (e.g. re-scored after the policy moved) and old_logp, advantages and
    mask are the batch's. The objective runs once on the whole batch (`gradient_weight`: its default aggregation and
    unit denominators, so per-batch statistics such as BAPO's bound search see the whole batch); w is 0 off the
    mask."""
    leaf = logp.detach().double().clone().requires_grad_(True)
    mask = batch.mask.double()
    kw = {k: (v.double() if torch.is_tensor(v) and v.is_floating_point() else v)
          for k, v in batch_inputs(key, batch).items()}
    w, metrics = gradient_weight(key, leaf, leaf, batch.old_logp.double(), batch.advantages.double(), mask, **kw, **hp)
    return (w * mask).detach().numpy(), metrics


def contribution_summary(w, advantages, mask) -> dict:
    """How the gradient splits between good and bad tokens: pos = sum |w| over A > 0 tokens, neg over A < 0,
    pos_share = pos / (pos + neg) (BAPO's rho; 1 when no A < 0 token carries gradient), and the fractions of A > 0,
    A < 0 and all A != 0 tokens whose weight is exactly 0 (silenced)."""
    w, a, m = to_numpy(w), to_numpy(advantages), to_numpy(mask) > 0
    pos_t, neg_t = m & (a > 0), m & (a < 0)
    pos, neg = float(np.abs(w[pos_t]).sum()), float(np.abs(w[neg_t]).sum())
    zero = np.abs(w) == 0

    def frac(sel):
        return float(zero[sel].mean()) if sel.any() else 0.0
    return {"pos": pos, "neg": neg, "pos_share": pos / (pos + neg) if neg > 0 else 1.0,
            "silenced_pos": frac(pos_t), "silenced_neg": frac(neg_t), "silenced": frac(pos_t | neg_t),
            "tokens": int((pos_t | neg_t).sum())}


def contribution_figure(summaries: Mapping[str, Mapping], rho0: float = 0.5) -> go.Figure:
    """Left: per objective, the share of the gradient (sum |w|) carried by A > 0 (blue) and A < 0 (red) tokens, with
    BAPO's target rho0 dashed. Right: the share of A > 0 and A < 0 tokens each objective silences (w exactly 0).
    summaries: objective -> `contribution_summary`."""
    keys = list(summaries)
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.18, column_widths=[0.55, 0.45], shared_yaxes=True,
                        subplot_titles=("share of the gradient Σ|w|", "tokens silenced (w = 0)"))
    share = [summaries[k]["pos_share"] for k in keys]
    # one bar per objective split in two: the A < 0 part starts where the A > 0 part ends
    # explicit widths and offsets: one bar per objective on the left, two thinner ones side by side on the right
    fig.add_trace(go.Bar(y=keys, x=share, orientation="h", name="A > 0", marker_color=POSITIVE, width=0.7,
                         offset=-0.35, legendgroup="pos", text=[f"{s:.1%}" for s in share], textposition="inside",
                         hovertemplate="%{y}<br>A > 0 share %{x:.3f}<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Bar(y=keys, x=[1 - s for s in share], base=share, orientation="h", name="A < 0",
                         marker_color=NEGATIVE, width=0.7, offset=-0.35, legendgroup="neg",
                         text=[f"{1 - s:.1%}" for s in share], textposition="inside",
                         hovertemplate="%{y}<br>A < 0 share %{x:.3f}<extra></extra>"), row=1, col=1)
    for side, color, group, offset in (("silenced_pos", POSITIVE, "pos", -0.35),
                                       ("silenced_neg", NEGATIVE, "neg", 0.0)):
        vals = [summaries[k][side] for k in keys]
        fig.add_trace(go.Bar(y=keys, x=vals, orientation="h", marker_color=color, showlegend=False, legendgroup=group,
                             width=0.35, offset=offset, text=[f"{v:.1%}" for v in vals], textposition="outside",
                             hovertemplate=f"%{{y}}<br>{side.replace('_', ' ')} %{{x:.3f}}<extra></extra>"),
                      row=1, col=2)
    fig.update_xaxes(range=[0, 1], tickformat=".0%", row=1, col=1)
    silenced = [summaries[k][side] for k in keys for side in ("silenced_pos", "silenced_neg")]
    fig.update_xaxes(tickformat=".0%", range=[0, 1.25 * max(silenced, default=0) or 0.01], row=1, col=2)
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(barmode="overlay", template="plotly_white", height=max(320, 90 + 40 * len(keys)),
                      title="positive vs negative tokens: who carries the gradient, who is silenced",
                      shapes=[dict(type="line", x0=rho0, x1=rho0, xref="x", y0=0, y1=1, yref="y domain",
                                   line=dict(color="black", dash="dash", width=1))],
                      legend=dict(orientation="h", y=-0.15))
    return fig


def silenced_scatter(weights: Mapping[str, np.ndarray], batch, cols: int = 4, seed: int = 0) -> go.Figure:
    """One panel per objective: every valid token with A != 0 at (its probability under pi_old, A + a small jitter),
    blue / red where it carries gradient (A > 0 / A < 0), black where the objective silences it (w exactly 0)."""
    m = to_numpy(batch.mask) > 0
    a, p_old = to_numpy(batch.advantages), np.exp(to_numpy(batch.old_logp))
    sel = m & (a != 0)
    jitter = np.random.default_rng(seed).uniform(-0.04, 0.04, size=a.shape)
    keys = list(weights)
    cols = max(1, min(cols, len(keys)))
    rows = max(1, math.ceil(len(keys) / cols))
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=keys, horizontal_spacing=0.04,
                        vertical_spacing=min(0.14, 0.4 / rows), shared_yaxes=True)
    for i, key in enumerate(keys):
        w = to_numpy(weights[key])
        where = dict(row=i // cols + 1, col=i % cols + 1)
        for label, part, color in (("kept, A > 0", sel & (w != 0) & (a > 0), POSITIVE),
                                   ("kept, A < 0", sel & (w != 0) & (a < 0), NEGATIVE),
                                   ("silenced (w = 0)", sel & (w == 0), "black")):
            fig.add_trace(go.Scatter(x=p_old[part], y=(a + jitter)[part], mode="markers", name=label,
                                       legendgroup=label, showlegend=i == 0,
                                       marker=dict(color=color, size=4 if color != "black" else 5,
                                                   opacity=0.5 if color != "black" else 0.9),
                                       customdata=np.stack([a[part], w[part]], -1),
                                       hovertemplate="π_old %{x:.3f}<br>A %{customdata[0]:+.3f}<br>"
                                                     "w %{customdata[1]:+.4f}<extra></extra>"), **where)
    low = float(p_old[sel].min()) if sel.any() else 1e-3
    start = math.log10(max(min(low / 1.5, 1e-3), 1e-12))
    # decades only (every n-th when there are many): 1-2-5 minor labels crowd a narrow panel
    fig.update_xaxes(type="log", range=[start, 0.05], dtick=max(1, math.ceil(-start / 4)), tickformat="~g")
    for c in range(1, cols + 1):
        fig.update_xaxes(title_text="π_old(token)", row=rows, col=c)
    for r_ in range(1, rows + 1):
        fig.update_yaxes(title_text="A", row=r_, col=1)
    fig.update_layout(title="which tokens each objective silences (x: old probability, y: advantage, jittered)",
                      template="plotly_white", height=max(340, 270 * rows), legend=dict(orientation="h", y=-0.12))
    return fig
