"""Figures for the entropy notebook (11_entropy): the entropy mechanism on an exact softmax, the logp-advantage
covariance of real tokens with Clip-Cov's and KL-Cov's selections, the stored entropy comparison, and one small
picture per entropy control (SAC's temperature, SAFE's gate, LLDS, HAPO's temperature, EPO's band).

Pure functions (data in, `go.Figure` or text out), except `entropy_explorer`, which wraps `entropy_step_figure` in
ipywidgets. Every number comes from the library's own code: the entropy-bonus regularizer and the registered
policy objectives stepped by autograd on an exact softmax, `token_covariance` / `clip_cov_selection` /
`kl_cov_selection`, `temperature_loss` with the `sac-temperature` controller, `kl_excess_penalty`, `llds_penalty`,
`AdaptiveTemperature`, `band_penalty` and `phase_weight`.

    from workbench.viz.entropy import entropy_explorer, covariance_tokens, covariance_figure
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from workbench import registry
from workbench.batch import RolloutBatch
from workbench.context import Forward
from workbench.viz.figures import NEGATIVE, NEUTRAL, POSITIVE, RUN_COLORS, log_tickvals

BONUS_COLOR, PG_COLOR, SELECT_COLOR = "#2ca02c", "#9467bd", "#000000"
SHAPES = ("one peak", "two peaks", "zipf", "ramp", "flat")
VOCAB = 8


# ----------------------------------------------------------------------------------------------------
# Key equations, from the registry


def family_entries(family: str = "entropy", extra: Sequence[tuple[str, str]] = ()) -> list:
    """Registry entries of `family` (every kind) sorted by key, the kinds of one key in registry order (a stable
    sort), then the (kind, key) entries of `extra`."""
    entries = sorted((e for e in registry.entries() if e.family == family), key=lambda e: e.key)
    return entries + [registry.get(kind, key) for kind, key in extra]


def equations_markdown(family: str = "entropy", extra: Sequence[tuple[str, str]] = ()) -> str:
    """One Markdown table, a row per registered component of `family` (and `extra`): its key over its kind, and its
    summary with the equation under it (one cell, so the summary wraps to the equation's width instead of being
    squeezed beside it). `|` inside an equation becomes `\\vert` so it cannot split a table cell."""
    def cell(text: str) -> str:
        return " ".join(str(text).split()).replace("|", "\\|")

    lines = ["| component (kind) | what it does, and its equation |", "| --- | --- |"]
    for e in family_entries(family, extra):
        equation = f"<br>${' '.join(e.equation.split()).replace('|', chr(92) + 'vert ')}$" if e.equation else ""
        lines.append(f"| `{e.key}`<br>({e.kind}) | {cell(e.summary)}{equation} |")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------------------
# The entropy mechanism on one exact softmax


def shape_logits(shape: str = "one peak", sharpness: float = 3.0, vocab: int = VOCAB) -> torch.Tensor:
    """Logits [vocab] (float64) = sharpness * a base shape: "one peak" (token 0 stands out), "two peaks" (tokens 0
    and 1), "zipf" (-log(i + 1): p ∝ (i + 1)^-sharpness at T = 1), "ramp" (-i / (vocab - 1)), "flat" (all 0)."""
    i = torch.arange(vocab, dtype=torch.float64)
    bases = {"one peak": (i == 0).double(), "two peaks": (i < 2).double(), "zipf": -torch.log1p(i),
             "ramp": -i / max(vocab - 1, 1), "flat": torch.zeros(vocab, dtype=torch.float64)}
    if shape not in bases:
        raise ValueError(f"shape must be one of {SHAPES}, got {shape!r}")
    return float(sharpness) * bases[shape]


def _as_logits(logits) -> torch.Tensor:
    z = torch.as_tensor(logits, dtype=torch.float64).flatten()
    if z.numel() < 2:
        raise ValueError("need at least two tokens")
    return z


def token_entropy(logits, temperature: float = 1.0) -> torch.Tensor:
    """Exact entropy H(softmax(z / T)) in nats of logits [..., V] (float64, differentiable); the same quantity as
    `ops.entropy_from_logits`, which the trainer logs (in float32)."""
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    logp = torch.log_softmax(torch.as_tensor(logits, dtype=torch.float64) / temperature, -1)
    return -(logp.exp() * logp).sum(-1)


def entropy_bonus_step(logits, temperature: float = 1.0, lr: float = 0.5, coef: float = 1.0) -> torch.Tensor:
    """Logits after one gradient-descent step of size `lr` on the registered `entropy-bonus` regularizer's loss
    -coef H (one token, its entropy at T): z' = z - lr dL/dz = z + lr coef dH/dz."""
    z = _as_logits(logits).clone().requires_grad_(True)
    entropy = token_entropy(z, temperature).reshape(1, 1)
    batch = RolloutBatch.from_rewards([0.0])
    loss, _ = registry.get("regularizer", "entropy-bonus").fn(Forward(logp=entropy, entropy=entropy), batch,
                                                              coef=coef)
    if not loss.requires_grad:  # coef = 0: the regularizer returns a constant
        return z.detach().clone()
    (grad,) = torch.autograd.grad(loss, z)
    return (z - lr * grad).detach()


def policy_gradient_step(logits, temperature: float = 1.0, token: int = 0, advantage: float = 1.0, lr: float = 0.5,
                         objective: str = "ppo-clip") -> torch.Tensor:
    """Logits after one on-policy step of size `lr` of a registered policy objective on ONE sampled token (old_logp =
    logp: ratio 1, so PPO-clip is REINFORCE): z' = z - lr dL/dz = z + lr A d log pi(token)/dz at temperature T."""
    z = _as_logits(logits).clone().requires_grad_(True)
    if not 0 <= token < z.numel():
        raise ValueError(f"token must be in [0, {z.numel() - 1}], got {token}")
    logp = torch.log_softmax(z / temperature, -1)[token].reshape(1, 1)
    adv = torch.full((1, 1), float(advantage), dtype=torch.float64)
    loss, _ = registry.get("objective", objective).fn(logp, logp.detach(), adv, torch.ones(1, 1, dtype=torch.float64),
                                                      agg="token-mean")
    (grad,) = torch.autograd.grad(loss, z, allow_unused=True)
    return (z - lr * (grad if grad is not None else torch.zeros_like(z))).detach()


def first_order_entropy_change(logits, new_logits, temperature: float = 1.0) -> float:
    """-Cov_{a~pi}(log pi(a), Δz_a / T): the entropy change of a small logit step Δz = new - old to first order
    (dH/dz_a = -pi_a (log pi_a + H) / T, whose weights sum to 0, hence the covariance)."""
    z, new = _as_logits(logits), _as_logits(new_logits)
    logp = torch.log_softmax(z / temperature, -1)
    p = logp.exp()
    dz = (new - z) / temperature
    cov = (p * (logp - (p * logp).sum()) * (dz - (p * dz).sum())).sum()
    return float(-cov)


def entropy_steps(logits, temperature: float = 1.0, bonus_lr: float = 0.5, token: int = 0, advantage: float = 1.0,
                  pg_lr: float = 0.5) -> dict:
    """The explorer's numbers: the distribution and entropy at T, after one entropy-bonus step and after one
    policy-gradient step on `token` with `advantage` (each: probs, entropy, change, first-order change), and, for
    every token k, the exact and first-order entropy change of the policy-gradient step taken on k instead."""
    z = _as_logits(logits)
    H = float(token_entropy(z, temperature))

    def after(new):
        h = float(token_entropy(new, temperature))
        return {"logits": new, "probs": torch.softmax(new / temperature, -1).numpy(), "entropy": h, "change": h - H,
                "first_order": first_order_entropy_change(z, new, temperature)}

    per_token = [after(policy_gradient_step(z, temperature, k, advantage, pg_lr)) for k in range(z.numel())]
    return {"probs": torch.softmax(z / temperature, -1).numpy(), "entropy": H, "temperature": temperature,
            "bonus": after(entropy_bonus_step(z, temperature, bonus_lr)), "pg": per_token[token], "token": token,
            "advantage": advantage, "pg_by_token": np.array([s["change"] for s in per_token]),
            "pg_by_token_first_order": np.array([s["first_order"] for s in per_token])}


def entropy_step_figure(shape: str = "one peak", sharpness: float = 3.0, temperature: float = 1.0,
                        bonus_lr: float = 0.5, token: int = 0, advantage: float = 1.0, pg_lr: float = 0.5,
                        vocab: int = VOCAB, logits=None) -> go.Figure:
    """Three panels, a fixed set of traces (so a widget redraws it in place):
    1. (top) the distribution at T, after one entropy-bonus step and after one policy-gradient step (bars per token);
    2. (bottom left) the entropy against the temperature, with the current T and the entropy after each step marked;
    3. (bottom right) the entropy change of the policy-gradient step if it were taken on each token (exact bars,
       first-order -Cov(log pi, Δz / T) ticks; the chosen token outlined)."""
    z = shape_logits(shape, sharpness, vocab) if logits is None else _as_logits(logits)
    s = entropy_steps(z, temperature, bonus_lr, token, advantage, pg_lr)
    tokens = [str(i) for i in range(z.numel())]
    given = f"{shape}, sharpness {sharpness:g}" if logits is None else "given logits"
    fig = make_subplots(rows=2, cols=2, specs=[[{"colspan": 2}, None], [{}, {}]], horizontal_spacing=0.14,
                        vertical_spacing=0.2, row_heights=[0.45, 0.55],
                        subplot_titles=(f"π at T = {temperature:g} ({given}) and after one step",
                                        "entropy H against T",
                                        f"ΔH of the PG step (A = {advantage:+g}) on each token"))
    fig.add_trace(go.Bar(x=tokens, y=s["probs"], name="π at T", marker_color=NEUTRAL,
                         hovertemplate="token %{x}<br>π %{y:.4f}<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Bar(x=tokens, y=s["bonus"]["probs"], name=f"after an entropy-bonus step (η = {bonus_lr:g})",
                         marker_color=BONUS_COLOR, hovertemplate="token %{x}<br>π %{y:.4f}<extra></extra>"),
                  row=1, col=1)
    fig.add_trace(go.Bar(x=tokens, y=s["pg"]["probs"], name=f"after a PG step on token {token} (A = {advantage:+g}, "
                                                             f"η = {pg_lr:g})",
                         marker_color=PG_COLOR, hovertemplate="token %{x}<br>π %{y:.4f}<extra></extra>"), row=1, col=1)
    temps = np.geomspace(0.1, 4.0, 60)
    curve = token_entropy(z[None, :].expand(len(temps), -1) / torch.as_tensor(temps)[:, None], 1.0).numpy()
    fig.add_trace(go.Scatter(x=temps, y=curve, name="H(T) of these logits", line=dict(color=NEUTRAL),
                             hovertemplate="T %{x:.3f}<br>H %{y:.4f} nats<extra></extra>"), row=2, col=1)
    for value, name, color, symbol in ((s["entropy"], "now", NEUTRAL, "circle"),
                                       (s["bonus"]["entropy"], "after the bonus step", BONUS_COLOR, "triangle-up"),
                                       (s["pg"]["entropy"], "after the PG step", PG_COLOR, "diamond")):
        fig.add_trace(go.Scatter(x=[temperature], y=[value], mode="markers", name=f"H {name}", showlegend=False,
                                 marker=dict(color=color, size=11, symbol=symbol, line=dict(width=1, color="white")),
                                 hovertemplate=f"{name}<br>T %{{x:.3f}}<br>H %{{y:.4f}} nats<extra></extra>"),
                      row=2, col=1)
    colors = [POSITIVE if v >= 0 else NEGATIVE for v in s["pg_by_token"]]
    outline = [3 if i == token else 0 for i in range(z.numel())]
    fig.add_trace(go.Bar(x=tokens, y=s["pg_by_token"], name="ΔH, exact", showlegend=False, marker_color=colors,
                         marker_line=dict(width=outline, color=SELECT_COLOR),
                         customdata=np.stack([s["probs"], s["pg_by_token_first_order"]], -1),
                         hovertemplate="PG step on token %{x} (π %{customdata[0]:.3f})<br>ΔH %{y:+.4f}<br>"
                                       "first order %{customdata[1]:+.4f}<extra></extra>"), row=2, col=2)
    fig.add_trace(go.Scatter(x=tokens, y=s["pg_by_token_first_order"], mode="markers",
                             name="first order −Cov(log π, Δz/T)",
                             marker=dict(color=SELECT_COLOR, symbol="line-ew-open", size=16, line=dict(width=2)),
                             hovertemplate="token %{x}<br>first order %{y:+.4f}<extra></extra>"), row=2, col=2)
    fig.update_xaxes(title_text="token", row=1, col=1)
    fig.update_xaxes(title_text="temperature T", type="log", row=2, col=1)
    fig.update_xaxes(title_text="token the PG step is taken on", row=2, col=2)
    fig.update_yaxes(title_text="probability", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="H (nats)", rangemode="tozero", row=2, col=1)
    fig.update_yaxes(title_text="ΔH (nats)", row=2, col=2)
    shapes = [dict(type="line", x0=0, x1=1, xref="x3 domain", y0=0, y1=0, yref="y3", line=dict(color=NEUTRAL,
                                                                                                     width=1))]
    title = (f"H = {s['entropy']:.3f} nats at T = {temperature:g}; entropy-bonus step {s['bonus']['change']:+.3f} "
             f"(first order {s['bonus']['first_order']:+.3f})<br>PG step on token {token} "
             f"(π = {s['probs'][token]:.2f}, A = {advantage:+g}): {s['pg']['change']:+.3f} "
             f"(first order {s['pg']['first_order']:+.3f})")
    fig.update_layout(title=dict(text=title, font=dict(size=13)), template="plotly_white", height=720,
                      barmode="group", shapes=shapes, margin=dict(t=100),
                      legend=dict(orientation="h", y=-0.14, x=0, xanchor="left"))
    return fig


def entropy_explorer(shape: str = "one peak", sharpness: float = 3.0, temperature: float = 1.0,
                     bonus_lr: float = 0.5, token: int = 0, advantage: float = 1.0, pg_lr: float = 0.5):
    """A distribution over 8 tokens (a preset shape times a sharpness), a temperature, an entropy-bonus step size,
    and a policy-gradient step on a chosen token with advantage A, redrawing `entropy_step_figure`. Returns an
    ipywidgets.VBox with `.figure`, `.controls` and `.update` (as the explorers of `workbench.viz.widgets`)."""
    import ipywidgets as W

    from workbench.viz.widgets import explorer, slider

    controls = {
        "shape": W.Dropdown(options=list(SHAPES), value=shape, description="shape"),
        "sharpness": slider(sharpness, 0.0, 8.0, 0.1, "sharpness"),
        "temperature": W.FloatLogSlider(value=temperature, base=10, min=-1, max=math.log10(4), step=0.02,
                                        description="temperature T", readout_format=".2f", continuous_update=False,
                                        style={"description_width": "initial"}),
        "bonus_lr": slider(bonus_lr, 0.0, 3.0, 0.05, "bonus step η"),
        "token": W.IntSlider(value=token, min=0, max=VOCAB - 1, description="PG token", continuous_update=False),
        "advantage": slider(advantage, -2.0, 2.0, 0.1, "advantage A"),
        "pg_lr": slider(pg_lr, 0.0, 3.0, 0.05, "PG step η"),
    }
    return explorer(controls, entropy_step_figure, columns=[["shape", "sharpness", "temperature"], ["bonus_lr"],
                                                            ["token", "advantage", "pg_lr"]])


# ----------------------------------------------------------------------------------------------------
# The covariance term on real rollouts, and what Clip-Cov / KL-Cov select


def covariance_tokens(logp, entropy, advantages, mask, *, old_logp=None, clip_cov: Mapping | None = None,
                      kl_cov: Mapping | None = None) -> dict:
    """Per valid token (row-major order), numpy arrays: "cov" (`token_covariance`), "entropy", "logp", "advantage",
    "row", "position", "candidate" and "detached" (`clip_cov_selection` with `clip_cov` keywords; old_logp defaults
    to logp, an on-policy batch), "penalized" (`kl_cov_selection` with `kl_cov` keywords)."""
    from workbench.objectives.entropy_cov import clip_cov_selection, kl_cov_selection, token_covariance

    old_logp = logp if old_logp is None else old_logp
    cov = token_covariance(logp, advantages, mask)
    detached, candidates = clip_cov_selection(logp, old_logp, advantages, mask, **dict(clip_cov or {}))
    penalized = kl_cov_selection(logp, advantages, mask, **dict(kl_cov or {}))
    valid = mask > 0
    rows, positions = torch.nonzero(valid, as_tuple=True)

    def pick(t):
        return t[valid].detach().double().numpy() if t.dtype.is_floating_point else t[valid].numpy()

    return {"cov": pick(cov), "entropy": pick(entropy), "logp": pick(logp), "advantage": pick(advantages),
            "row": rows.numpy(), "position": positions.numpy(), "candidate": pick(candidates),
            "detached": pick(detached), "penalized": pick(penalized)}


def covariance_summary(data: Mapping) -> dict:
    """Counts and means of `covariance_tokens`: tokens, candidates, detached, penalized; mean entropy / logp / A of
    all tokens and of the penalized ones; the correlation of cov with entropy over all tokens."""
    def mean(key, where=None):
        values = data[key] if where is None else data[key][where]
        return float(values.mean()) if len(values) else float("nan")

    pen = data["penalized"]
    corr = float(np.corrcoef(data["cov"], data["entropy"])[0, 1]) if len(data["cov"]) > 1 else float("nan")
    return {"tokens": len(data["cov"]), "candidates": int(data["candidate"].sum()),
            "detached": int(data["detached"].sum()), "penalized": int(pen.sum()), "entropy": mean("entropy"),
            "entropy_penalized": mean("entropy", pen), "logp": mean("logp"), "logp_penalized": mean("logp", pen),
            "advantage_penalized": mean("advantage", pen), "positive_advantage_penalized":
            float((data["advantage"][pen] > 0).mean()) if pen.any() else float("nan"), "corr_cov_entropy": corr}


def covariance_figure(data: Mapping, clip_cov_lb: float = 1.0, clip_cov_ub: float = 5.0,
                      title: str | None = None) -> go.Figure:
    """Top: token entropy against cov_t, the Clip-Cov candidate band (lb, ub) shaded. Bottom: log-prob against
    advantage. Tokens coloured by cov_t (red: positive, the entropy-lowering side); tokens Clip-Cov detaches as black
    crosses, tokens KL-Cov penalizes as red rings."""
    fig = make_subplots(rows=2, cols=1, vertical_spacing=0.14, subplot_titles=(
        "token entropy H_t against cov_t = (A_t − mean A)(log π_t − mean log π)", "log π_t against A_t"))
    cov, ent, logp, adv = data["cov"], data["entropy"], data["logp"], data["advantage"]
    hover = np.stack([data["row"], data["position"], cov, ent, logp, adv], -1)
    template = ("sample %{customdata[0]}, token %{customdata[1]}<br>cov %{customdata[2]:+.3f}<br>H %{customdata[3]:.3f}"
                "<br>log π %{customdata[4]:.3f}<br>A %{customdata[5]:+.3f}<extra></extra>")
    for row, (x, y) in enumerate(((cov, ent), (logp, adv)), start=1):
        fig.add_trace(go.Scatter(x=x, y=y, mode="markers", name="tokens (colour: cov_t)", showlegend=False,
                                 customdata=hover, hovertemplate=template,
                                 marker=dict(size=6, color=cov, coloraxis="coloraxis", opacity=0.7)), row=row, col=1)
    for key, name, marker in (("detached", "Clip-Cov detaches", dict(symbol="x", size=9, color=SELECT_COLOR)),
                              ("penalized", "KL-Cov penalizes", dict(symbol="circle-open", size=12, color=NEGATIVE,
                                                                     line=dict(width=2)))):
        sel = data[key].astype(bool)
        for row, (x, y) in enumerate(((cov, ent), (logp, adv)), start=1):
            fig.add_trace(go.Scatter(x=x[sel], y=y[sel], mode="markers", name=f"{name} ({int(sel.sum())})",
                                     legendgroup=key, showlegend=row == 1, marker=marker, customdata=hover[sel],
                                     hovertemplate=template), row=row, col=1)
    peak = float(np.abs(cov).max()) if len(cov) else 1.0
    shapes = [dict(type="rect", x0=clip_cov_lb, x1=clip_cov_ub, xref="x", y0=0, y1=1, yref="y domain",
                   fillcolor="#2ca02c", opacity=0.12, line_width=0, layer="below")]
    fig.update_xaxes(title_text="cov_t", row=1, col=1)
    fig.update_yaxes(title_text="entropy H_t (nats)", row=1, col=1)
    fig.update_xaxes(title_text="log π_t", row=2, col=1)
    fig.update_yaxes(title_text="advantage A_t", row=2, col=1)
    fig.update_layout(title=title or f"{len(cov)} response tokens (green: Clip-Cov's band {clip_cov_lb:g} < cov < "
                                     f"{clip_cov_ub:g})",
                      template="plotly_white", height=820, shapes=shapes, legend=dict(orientation="h", y=-0.08),
                      coloraxis=dict(colorscale="RdBu_r", cmin=-peak, cmax=peak,
                                     colorbar=dict(title="cov_t", len=0.4, y=0.8)))
    return fig


# ----------------------------------------------------------------------------------------------------
# Before / after tables (stored runs, live comparisons) and the claims


BEFORE_AFTER = (("accuracy", "greedy accuracy"), ("pass@1", "pass@1"), ("pass@k", "pass@k"),
                ("entropy", "entropy (nats)"))
EVAL_CURVES = ("entropy", "eval/accuracy", "eval/pass@1", "eval/pass@k")  # what section 4 of notebook 11 draws


def with_start(groups: Mapping[str, list[list[dict]]], summaries: Sequence[Mapping]) -> dict[str, list[list[dict]]]:
    """`groups` (recipe -> metric rows per seed) with each seed's held-out evaluation before training prepended as a
    row at step -1 (eval/accuracy, eval/pass@1, eval/pass@k, eval/entropy = the summary's *_before values; the
    evaluation of row `step` s runs after s + 1 updates, so -1 is "after 0 updates"). Seed i of a recipe is matched
    to its summary by "seed" (or by order when the summaries carry none). The input is not modified."""
    out = {}
    for recipe, seeds in groups.items():
        mine = [s for s in summaries if s.get("recipe") == recipe]
        by_seed = {s.get("seed", i): s for i, s in enumerate(mine)}
        out[recipe] = []
        for i, rows in enumerate(seeds):
            s = by_seed.get(i, {})
            start = {f"eval/{key}": s.get(f"{key}_before") for key in ("accuracy", "pass@1", "pass@k", "entropy")}
            start = {k: v for k, v in start.items() if v is not None}
            out[recipe].append(([{"step": -1, **start}] if start else []) + [dict(r) for r in rows])
    return out


def before_after_rows(summaries: Sequence[Mapping], metrics: Sequence[tuple[str, str]] = BEFORE_AFTER) -> list[dict]:
    """One row per recipe (first-seen order) from run summaries (each with "recipe" and *_before / *_after keys):
    seeds, pass_k, and for each of `metrics` (default accuracy, pass@1, pass@k, entropy) the mean before, mean after
    and the std of the after values over seeds (None where the runs do not report it)."""
    recipes: dict[str, list[Mapping]] = {}
    for s in summaries:
        recipes.setdefault(s["recipe"], []).append(s)
    rows = []
    for recipe, seeds in recipes.items():
        row = {"recipe": recipe, "seeds": len(seeds), "pass_k": seeds[0].get("pass_k")}
        for key, _ in metrics:
            before = [s[f"{key}_before"] for s in seeds if s.get(f"{key}_before") is not None]
            after = [s[f"{key}_after"] for s in seeds if s.get(f"{key}_after") is not None]
            row[f"{key}_before"] = statistics.fmean(before) if before else None
            row[f"{key}_after"] = statistics.fmean(after) if after else None
            row[f"{key}_after_std"] = statistics.stdev(after) if len(after) > 1 else (0.0 if after else None)
        rows.append(row)
    return rows


def before_after_table(summaries: Sequence[Mapping], title: str | None = None,
                       metrics: Sequence[tuple[str, str]] = BEFORE_AFTER) -> go.Figure:
    """`before_after_rows` as a table: "before → after ± std over seeds" for each (key, label) of `metrics`."""
    rows = before_after_rows(summaries, metrics)

    def cell(row, key):
        if row[f"{key}_after"] is None:
            return "–"
        before = f"{row[f'{key}_before']:.3f} → " if row[f"{key}_before"] is not None else ""
        spread = f" ± {row[f'{key}_after_std']:.3f}" if row["seeds"] > 1 else ""
        return f"{before}{row[f'{key}_after']:.3f}{spread}"

    ks = {row["pass_k"] for row in rows if row["pass_k"]}
    labels = [label.replace("pass@k", f"pass@{ks.pop()}") if key == "pass@k" and len(ks) == 1 else label
              for key, label in metrics]
    cells = [[r["recipe"] for r in rows], [str(r["seeds"]) for r in rows]]
    cells += [[cell(r, key) for r in rows] for key, _ in metrics]
    fig = go.Figure(go.Table(header=dict(values=["recipe", "seeds", *labels], fill_color="#e8eef7", align="left"),
                             cells=dict(values=cells, align="left"), columnwidth=[1.6, 0.6, *[2] * len(metrics)]))
    fig.update_layout(title=title or "held-out before → after training (mean ± std over seeds)",
                      # "before → after ± std" wraps to two lines in the book's column: room for both
                      template="plotly_white", height=100 + 44 * len(rows), margin=dict(t=50, b=10, l=10, r=10))
    return fig


# ----------------------------------------------------------------------------------------------------
# One picture per entropy control outside the comparison


def sac_temperature_toy(target_entropy: float = 1.0, steps: int = 300, alpha: float = 0.01, alpha_lr: float = 0.05,
                        policy_lr: float = 0.5, advantage: float = 1.0, vocab: int = VOCAB,
                        learn_alpha: bool = True) -> dict:
    """A softmax over `vocab` tokens (logits start at 0) under constant sharpening pressure (a REINFORCE step on
    token 0 with `advantage`, every step) plus the `sac-temperature` regularizer's bonus alpha H, by SGD; alpha is
    driven by the `sac-temperature` controller (Adam on log alpha, lr `alpha_lr`, target `target_entropy`) or held
    fixed (`learn_alpha=False`). Returns {"step", "entropy", "alpha"} arrays (values before each step)."""
    regularizer = registry.get("regularizer", "sac-temperature").fn
    controller = registry.get("controller", "sac-temperature").fn
    state = controller.init(initial=alpha, target_entropy=target_entropy, lr=alpha_lr)
    z = torch.zeros(vocab, dtype=torch.float64, requires_grad=True)
    batch = RolloutBatch.from_rewards([0.0])
    entropies, alphas = [], []
    for _ in range(steps):
        a = controller.value(state) if learn_alpha else alpha
        logp = torch.log_softmax(z, -1)
        entropy = token_entropy(z).reshape(1, 1)
        bonus, _ = regularizer(Forward(logp=logp[:1].reshape(1, 1), entropy=entropy), batch, alpha=a)
        loss = -advantage * logp[0] + bonus
        (grad,) = torch.autograd.grad(loss, z)
        entropies.append(float(entropy.detach()))
        alphas.append(a)
        with torch.no_grad():
            z -= policy_lr * grad
        if learn_alpha:
            batch.entropy = entropy.detach()
            state = controller.update(state, batch, {})
    return {"step": np.arange(steps), "entropy": np.array(entropies), "alpha": np.array(alphas)}


def sac_temperature_figure(target_entropy: float = 1.0, steps: int = 300, **kw) -> go.Figure:
    """Entropy (left) and alpha (right) of `sac_temperature_toy` with alpha learned and with alpha fixed."""
    learned = sac_temperature_toy(target_entropy, steps, **kw)
    fixed = sac_temperature_toy(target_entropy, steps, learn_alpha=False, **kw)
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                        subplot_titles=("entropy H of the toy policy", "α, the bonus coefficient"))
    for run, name, color in ((learned, "α learned (sac-temperature)", POSITIVE), (fixed, "α fixed", NEUTRAL)):
        fig.add_trace(go.Scatter(x=run["step"], y=run["entropy"], name=name, legendgroup=name,
                                 line=dict(color=color)), row=1, col=1)
        fig.add_trace(go.Scatter(x=run["step"], y=run["alpha"], name=name, legendgroup=name, showlegend=False,
                                 line=dict(color=color)), row=1, col=2)
    shapes = [dict(type="line", x0=0, x1=1, xref="x domain", y0=target_entropy, y1=target_entropy, yref="y",
                   line=dict(color=NEGATIVE, dash="dash", width=1))]
    annotations = [*fig.layout.annotations, dict(x=1, xref="x domain", y=target_entropy, yref="y", showarrow=False,
                                                text=f"target H̄ = {target_entropy:g}", xanchor="right",
                                                yanchor="bottom", font=dict(color=NEGATIVE, size=11))]
    fig.update_xaxes(title_text="step")
    fig.update_yaxes(title_text="H (nats)", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="α", type="log", row=1, col=2)
    fig.update_layout(title="sac-temperature: the bonus α H on a toy softmax pushed to one token",
                      template="plotly_white", height=400, shapes=shapes, annotations=annotations,
                      legend=dict(orientation="h", y=-0.25))
    return fig


def safe_penalty_curves(entropies=None, kl_excess=(0.1, 0.3), threshold: float = 0.45, coef: float = 0.1,
                        entropy_floor: float = 2.0) -> dict:
    """SAFE's gate g(H) (`entropy_gate`) and penalty P (`kl_excess_penalty`) over entropies, for short-EMA KLs
    kl_s = threshold + each of `kl_excess` (and one below the threshold, where P = 0). Returns {"entropy",
    "gate", kl_s: P array}."""
    from workbench.regularizers.safe import entropy_gate, kl_excess_penalty

    H = np.linspace(0.0, 4.0, 81) if entropies is None else np.asarray(entropies, dtype=float)
    out = {"entropy": H, "gate": np.array([entropy_gate(float(h), entropy_floor) for h in H])}
    for kl_s in (threshold - 0.05, *(threshold + e for e in kl_excess)):
        kl = torch.tensor(kl_s, dtype=torch.float64)  # kl_s_prev = KL = kl_s: the EMA stays at kl_s
        out[round(kl_s, 6)] = np.array([float(kl_excess_penalty(kl, kl_s, threshold, float(h), coef=coef,
                                                                entropy_floor=entropy_floor)[0]) for h in H])
    return out


def safe_penalty_figure(threshold: float = 0.45, kl_excess=(0.1, 0.3), **kw) -> go.Figure:
    """Left: SAFE's entropy gate g(H) = max(0.5, H_floor / (H + 0.1)). Right: the penalty against H at a few
    short-EMA KLs."""
    data = safe_penalty_curves(kl_excess=kl_excess, threshold=threshold, **kw)
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1, subplot_titles=(
        "entropy gate g(H)", f"P = c (kl_s − θ)² g(H), θ = {threshold:g}"))
    fig.add_trace(go.Scatter(x=data["entropy"], y=data["gate"], name="g(H)", line=dict(color=NEUTRAL)), row=1, col=1)
    for i, kl_s in enumerate(k for k in data if not isinstance(k, str)):
        fig.add_trace(go.Scatter(x=data["entropy"], y=data[kl_s], name=f"kl_s = {kl_s:g}",
                                 line=dict(color=RUN_COLORS[i % len(RUN_COLORS)])), row=1, col=2)
    fig.update_xaxes(title_text="rollout entropy H (nats)")
    fig.update_yaxes(title_text="g(H)", type="log", tickvals=log_tickvals(data["gate"]), tickformat="~g", row=1, col=1)
    fig.update_yaxes(title_text="P", row=1, col=2)
    fig.update_layout(title="safe: low entropy amplifies the KL excess penalty", template="plotly_white", height=400,
                      legend=dict(orientation="h", y=-0.25))
    return fig


# A toy batch for LLDS: 4 responses x 6 tokens, old log-probs and the log-probs after an update.
LLDS_OLD = ((-0.5, -1.0, -0.2, -0.8, -0.3, -0.6), (-0.4, -0.9, -0.5, -0.7, -0.2, -0.6),
            (-0.6, -0.3, -1.2, -0.4, -0.8, -0.5), (-0.2, -0.7, -0.4, -0.9, -0.3, -1.1))
LLDS_NEW = ((-0.7, -0.9, -0.5, -1.1, -0.2, -0.8), (-0.6, -0.6, -0.3, -0.5, -0.3, -0.4),
            (-0.9, -0.2, -1.5, -0.6, -0.7, -0.8), (-0.5, -0.5, -0.9, -0.6, -0.4, -1.4))
LLDS_ADV = (1.0, 1.0, -1.0, -1.0)


def llds_toy(old=LLDS_OLD, new=LLDS_NEW, advantages=LLDS_ADV, gate: str = "action") -> dict:
    """`llds_penalty` on a toy batch (rows: responses, advantage per row): {"delta": logp - old [B, T], "penalty"
    relu(old - logp) on the penalized tokens, "penalized" bool, "grad": d penalty / d logp [B, T] (autograd),
    "fell": each row's summed log-prob change < 0 on its preserving tokens, "advantages"}."""
    from workbench.regularizers.llds import llds_penalty

    old = torch.tensor(old, dtype=torch.float64)
    logp = torch.tensor(new, dtype=torch.float64, requires_grad=True)
    adv = torch.tensor(advantages, dtype=torch.float64)[:, None].expand_as(old).clone()
    mask = torch.ones_like(old)
    penalty, penalized, _ = llds_penalty(logp, old, adv, mask, gate=gate)
    (grad,) = torch.autograd.grad(penalty.sum(), logp)
    delta = (logp - old).detach()
    return {"delta": delta.numpy(), "penalty": penalty.detach().numpy(), "penalized": penalized.numpy(),
            "grad": grad.numpy(), "fell": (delta.sum(-1) < 0).numpy(), "advantages": np.asarray(advantages, float)}


def llds_figure(**kw) -> go.Figure:
    """One panel per toy response: each token's log-prob change in the update, red where LLDS penalizes it (its
    gradient pushes the token back up), light where it fell without a penalty, blue where it rose."""
    data = llds_toy(**kw)
    B, T = data["delta"].shape
    titles = []
    for b in range(B):
        side = "A ≥ 0" if data["advantages"][b] >= 0 else "A < 0 (not preserved)"
        titles.append(f"response {b}: {side}<br><sup>likelihood {'fell' if data['fell'][b] else 'rose'} "
                      f"(Σ Δlog π = {data['delta'][b].sum():+.2f})</sup>")
    cols = 2
    rows = math.ceil(B / cols)
    fig = make_subplots(rows=rows, cols=cols, shared_yaxes=True, horizontal_spacing=0.06, vertical_spacing=0.22,
                        subplot_titles=titles)
    for b in range(B):
        colors = [NEGATIVE if data["penalized"][b, t] and data["penalty"][b, t] > 0 else
                  "#f4a3a3" if data["delta"][b, t] < 0 else POSITIVE for t in range(T)]
        fig.add_trace(go.Bar(x=list(range(T)), y=data["delta"][b], marker_color=colors, showlegend=False,
                             customdata=np.stack([data["penalty"][b], data["grad"][b]], -1),
                             hovertemplate="token %{x}<br>Δlog π %{y:+.2f}<br>penalty %{customdata[0]:.2f}<br>"
                                           "∂P/∂log π %{customdata[1]:+.2f}<extra></extra>"),
                      row=b // cols + 1, col=b % cols + 1)
        fig.update_xaxes(title_text="token", row=b // cols + 1, col=b % cols + 1)
    for r in range(1, rows + 1):
        fig.update_yaxes(title_text="log π − log π_old", row=r, col=1)
    fig.update_layout(title="llds: penalized tokens in red (A ≥ 0, fell, in a response that fell)",
                      template="plotly_white", height=300 * rows + 120, margin=dict(t=110))
    return fig


def hapo_temperature_curves(temperature: float = 1.0, tau: float = 0.05, entropy_pivot: float = 0.8,
                            vocab: int = VOCAB, n: int = 121) -> dict:
    """HAPO's per-token temperature on a range of next-token distributions (one-peak logits of sharpness 0..12):
    statistics (`entropy_stats`) from these entropies, then `AdaptiveTemperature.temperatures` with the intended
    mapping and with `reference_bug`. Returns {"entropy", "h_hat", "T", "h_hat_bug", "T_bug", "stats"}, sorted by
    entropy."""
    from workbench import ops
    from workbench.objectives.hapo import entropy_stats, normalized_entropy
    from workbench.rollout.hapo_temperature import AdaptiveTemperature

    logits = torch.stack([shape_logits("one peak", s, vocab) for s in np.linspace(0.0, 12.0, n)]).float()
    entropy = ops.entropy_from_logits(logits, temperature)
    order = torch.argsort(entropy)
    logits, entropy = logits[order], entropy[order]
    stats = entropy_stats(entropy[None, :], torch.ones(1, n), pivot_quantile=entropy_pivot)
    out = {"entropy": entropy.double().numpy(), "stats": stats}
    for suffix, bug in (("", False), ("_bug", True)):
        hook = AdaptiveTemperature(stats, temperature=temperature, tau=tau, reference_bug=bug)
        out[f"T{suffix}"] = hook.temperatures(logits).double().numpy()
        out[f"h_hat{suffix}"] = normalized_entropy(entropy, stats, reference_bug=bug).double().numpy()
    return out


def hapo_temperature_figure(temperature: float = 1.0, tau: float = 0.05, **kw) -> go.Figure:
    """Left: normalized entropy h_hat against the token entropy. Right: the sampling temperature T_t = T (1 + τ
    h_hat); the code's reading (reference_bug) dashed."""
    d = hapo_temperature_curves(temperature, tau, **kw)
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1, subplot_titles=(
        "normalized entropy ĥ_t", f"T_t = T (1 + τ ĥ_t), T = {temperature:g}, τ = {tau:g}"))
    for suffix, name, dash in (("", "intended (default)", "solid"), ("_bug", "HAPO's code (reference_bug)", "dash")):
        for col, key in ((1, "h_hat"), (2, "T")):
            fig.add_trace(go.Scatter(x=d["entropy"], y=d[key + suffix], name=name, legendgroup=name,
                                     showlegend=col == 1, line=dict(color=POSITIVE if not suffix else NEGATIVE,
                                                                    dash=dash)), row=1, col=col)
    pivot = math.exp(d["stats"].pivot)
    shapes = [dict(type="line", x0=pivot, x1=pivot, xref=x, y0=0, y1=1, yref=f"{y} domain",
                   line=dict(color=NEUTRAL, dash="dot", width=1)) for x, y in (("x", "y"), ("x2", "y2"))]
    fig.update_xaxes(title_text="token entropy H_t (nats)", type="log")
    fig.update_yaxes(title_text="ĥ_t", row=1, col=1)
    fig.update_yaxes(title_text="T_t", row=1, col=2)
    fig.update_layout(title="hapo-temperature: hotter at uncertain tokens (dotted: the pivot)",
                      template="plotly_white", height=400, shapes=shapes, legend=dict(orientation="h", y=-0.25))
    return fig


def epo_band_curves(hbar: float = 0.5, bands=((0.8, 1.2), (0.0, 2.0)), out_range_penalty: float = 0.1,
                    total: int = 100) -> dict:
    """EPO's smoothing penalty P(H) (`band_penalty`) against a token's entropy for a historical mean `hbar`, for each
    (low, high) band (differentiable default, its dP/dH by autograd, and the reference's constant), and the phase
    weight w(step) (`phase_weight`) over `total` steps."""
    from workbench.regularizers.epo import band_penalty, phase_weight

    H = torch.linspace(0.0, 3.0 * hbar, 121, dtype=torch.float64, requires_grad=True)
    out = {"entropy": H.detach().numpy(), "step": np.arange(total + 1),
           "phase_weight": np.array([phase_weight(s, total) for s in range(total + 1)])}
    for low, high in bands:
        hb = torch.full_like(H, hbar)
        p = band_penalty(H, hb, low=low, high=high, out_range_penalty=out_range_penalty)
        (grad,) = torch.autograd.grad(p.sum(), H)
        const = band_penalty(H.detach(), hb, low=low, high=high, out_range_penalty=out_range_penalty,
                             reference_bug=True)
        out[(low, high)] = {"penalty": p.detach().numpy(), "grad": grad.numpy(), "reference_bug": const.numpy()}
    return out


def epo_band_figure(hbar: float = 0.5, bands=((0.8, 1.2), (0.0, 2.0)), out_range_penalty: float = 0.1,
                    total: int = 100) -> go.Figure:
    """Left: the smoothing penalty against a token's entropy around the historical mean (solid: the differentiable
    default; dotted: the reference's constant, no gradient). Right: the phase weight over training."""
    d = epo_band_curves(hbar, bands, out_range_penalty, total)
    fig = make_subplots(rows=1, cols=2, column_widths=[0.6, 0.4], horizontal_spacing=0.1, subplot_titles=(
        f"penalty P_t, historical mean H̄ = {hbar:g}", "phase weight w"))
    for i, band in enumerate(bands):
        color, name = RUN_COLORS[i % len(RUN_COLORS)], f"band [{band[0]:g}, {band[1]:g}] × H̄"
        fig.add_trace(go.Scatter(x=d["entropy"], y=d[band]["penalty"], name=name, legendgroup=name,
                                 line=dict(color=color)), row=1, col=1)
        fig.add_trace(go.Scatter(x=d["entropy"], y=d[band]["reference_bug"], name=f"{name}, reference_bug",
                                 legendgroup=name, line=dict(color=color, dash="dot")), row=1, col=1)
    fig.add_trace(go.Scatter(x=d["step"], y=d["phase_weight"], name="w(step)", line=dict(color=NEUTRAL)),
                  row=1, col=2)
    shapes = [dict(type="line", x0=hbar, x1=hbar, xref="x", y0=0, y1=1, yref="y domain",
                   line=dict(color=NEUTRAL, dash="dot", width=1))]
    fig.update_xaxes(title_text="token entropy H_t (nats)", row=1, col=1)
    fig.update_xaxes(title_text=f"step (of {total})", row=1, col=2)
    fig.update_yaxes(title_text="P_t", row=1, col=1)
    fig.update_yaxes(title_text="w", range=[0, 1.05], row=1, col=2)
    fig.update_layout(title="epo: a penalty outside the band around the history", template="plotly_white",
                      height=400, shapes=shapes,
                      legend=dict(orientation="h", y=-0.25))
    return fig
