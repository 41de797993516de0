"""The per-token gradient weight d(-l)/d(log pi) of a registered policy objective over (r, A), by autograd through the
objective itself (so a figure follows the code, including objectives registered after this file was written): the
clipping zoo's objectives (family F1 and F3's, notebook 04) and the trust regions of family F2 (notebook 10).

- `gradient_weight_surface`: the weight on a grid, one one-token row per (A, r) cell. An objective that reads more
  than (logp, old_logp, advantages, mask) gets each such input from an explicit, documented grid setting (`KNOBS`,
  `INPUTS`); `not_drawable` lists, with the reason, what cannot be drawn on a (r, A) grid.
- `gradient_weight_figure` / `surface_figure`: one objective, heatmap and slices at A = ±1 (F1's title names its
  settings, F2's also what its inputs mean); `gradient_weight_grid` / `surface_grid`: one panel per objective on one
  colour scale (F1's defaults: every zoo objective; F2's: every drawable F2 objective, the rest named with the
  reason); `gradient_weight_slices`: the weight against r at fixed A, one line per objective.

Pure functions (data in, `go.Figure` out); the explorers around them are `workbench.viz.weight_explorers`.

    from workbench.viz.weight_surfaces import gradient_weight_surface, gradient_weight_grid, surface_grid
"""
from __future__ import annotations

import html
import inspect
import math
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from workbench import ops, registry
from workbench.viz.style import NEGATIVE, NEUTRAL, POSITIVE, RUN_COLORS, SIGNED_SCALE, is_number, title_step_axes

FAMILIES = ("canonical", "surrogate")  # F1 and F2 (data/catalog.tsv's family column)
F2 = "surrogate"
ZERO_COLOR = "#b0b0b0"  # cells where the gradient is exactly zero (the clipped branch is active)
COLOR_CAP = 4.0  # the shared colour scale of a grid stops at |w| = 4 (= max |A r| on the default grid)
UNIT = ops.Denominators(num_tokens=1.0, num_seqs=1.0, norm_constant=1.0)  # aggregated loss = sum of token losses


# ----------------------------------------------------------------------------------------------------
# Which objectives have a surface


OWN_FIGURES = {"surrogate": "surface_grid (notebook 10)", "credit": "notebook 13", "preference": "notebook 08",
               "rollout": "notebook 14"}


def policy_objectives() -> list:
    """Registered policy objectives (registry entries) outside families F2, F4 and F5, sorted by key; new
    registrations appear here. F2's objectives read inputs besides (r, A) (a token's entropy, GBPO's target, the
    off-policy flag, ...): `surface_grid` draws them with those inputs as knobs (notebook 10). F4's act on a turn's or
    a chunk's tokens together or regress values from the LM head (notebook 13). F5's train guided, teacher or
    distilled tokens beside sampled ones (RL-PLUS's MIS ratio, SRPO's distillation over the vocabulary, R3L's
    scaled REINFORCE): notebook 14. The `preference` objective applies a
    preference loss to whole items' summed log-probs (notebook 08 draws those losses). The critic's loss is a `value`
    component, not an objective, so every entry here takes logp first."""
    return [e for e in registry.entries("objective") if e.family not in OWN_FIGURES]


def family_objectives(families: Sequence[str] = FAMILIES) -> list:
    """Registered policy objectives (registry entries) of the given catalog families, sorted by key."""
    return [e for e in registry.entries("objective") if e.family in set(families)]


class NotDrawable(ValueError):
    """The objective reads an input a (r, A) grid cannot have."""


def required_inputs(fn) -> list[str]:
    """Keyword-only parameters without a default: the inputs the objective reads beyond its signature's slots."""
    return [name for name, p in inspect.signature(fn).parameters.items()
            if p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is inspect.Parameter.empty]


def why_not_drawable(key: str) -> str | None:
    """None if the objective's surface can be drawn, else the reason (the inputs a grid cannot set)."""
    missing = [n for n in required_inputs(registry.get("objective", key).fn) if n not in INPUTS]
    if not missing:
        return None
    return "needs " + "; ".join(NOT_ON_A_GRID.get(n, f"the input {n!r}, which no grid setting provides")
                                for n in missing)


def drawable_keys(families: Sequence[str] = FAMILIES) -> list[str]:
    return [e.key for e in family_objectives(families) if why_not_drawable(e.key) is None]


def not_drawable(families: Sequence[str] = (F2,), methods: bool = True) -> dict[str, str]:
    """key -> why it has no (r, A) surface: objectives of `families` reading an input a grid cannot set, and (with
    `methods`) the family's catalog methods registered without a policy objective (they change A or add a term)."""
    from workbench.recipes import get_recipe

    out = {e.key: why_not_drawable(e.key) for e in family_objectives(families) if why_not_drawable(e.key)}
    if not methods:
        return out
    objectives = {e.key for e in registry.entries("objective")}
    for key, row in registry.catalog().items():
        if row.get("family") not in families or key in objectives or key in out:
            continue
        kinds = sorted({e.kind for e in registry.entries() if e.key == key and e.kind != "recipe"})
        if not kinds:
            continue  # not implemented yet: the catalog page lists it
        try:
            base = get_recipe(key).objective.key
            loss = f"; its recipe's policy loss is {base!r}, drawn under that key"
        except (KeyError, ValueError):
            loss = ""
        out[key] = f"registered as {' + '.join(kinds)}, not a policy objective: it changes A or adds a term{loss}"
    return out


# ----------------------------------------------------------------------------------------------------
# What a (r, A) grid sets for the inputs an objective reads beyond its signature


@dataclass(frozen=True)
class Knob:
    """One setting of an input an objective reads beyond (logp, old_logp, advantages, mask), as the grid gets it."""

    name: str
    default: float | bool
    doc: str
    scale: str = "linear"  # "linear", "log" (a log-scale slider) or "bool" (a checkbox)
    lo: float = 0.0
    hi: float = 1.0
    step: float = 0.01


KNOBS = {k.name: k for k in (
    Knob("old_over_mu", 1.0, "π_old/μ of the token: how much likelier the policy that scored the batch (π_old) "
         "finds it than the behaviour policy that sampled it (μ: the rollout engine, or an older policy for a "
         "replayed row). mu_logp = old_logp − log(π_old/μ); 1 is fresh data, μ = π_old.", "log", 0.25, 4.0),
    Knob("entropy", 1.0, "the token's entropy H (nats). Each grid token sits in a batch of 100 tokens with 99 "
         "others log-uniform on [0.01, 2] nats (BACKGROUND_ENTROPY), so HAPO's pivot (the 0.8 quantile of log H) "
         "and AEPO's top-20 % threshold sit near 0.7 nats, whatever the grid's size.", "log", 0.01, 3.0),
    Knob("target_from_A", True, "GBPO: each row's target advantage Â is its own A (the side of the group median "
         "usually follows the side of the mean); off: every row gets the target_adv slider's value.", "bool"),
    Knob("target_adv", 1.0, "GBPO's target advantage Â = (R − median_g R)/(std_g R + ε)/T when not taken from A: "
         "the target ratio is ρ* = 1 − ε_low + (ε_low + ε_high)σ(Â).", "linear", -3.0, 3.0, 0.05),
    Knob("off_policy", True, "policy-shaping: the token is off-policy (a teacher / reference token, "
         "offpolicy_mask = 1), trained by −A p/(p + γ); off: an on-policy token, trained by PPO-clip.", "bool"),
    Knob("p_old", 0.1, "the token's probability under the policy that scored the batch (old_logp = log p_old): an "
         "off-policy token's weight depends on p = r p_old itself, not only on r (cells with p > 1 are blank).",
         "log", 0.01, 1.0),
    Knob("task_value", 0.09, "VSPO's task value v = p̂(1 − p̂) of the row's prompt: 0.09 is a prompt solved 10 % "
         "of the time; 0.25 (p̂ = 1/2) is plain PPO-clip.", "linear", 0.0, 0.25, 0.005),
)}
# The required keyword inputs a grid can fill, and the knobs that set each.
INPUTS = {"mu_logp": ("old_over_mu",), "entropy": ("entropy",), "target_adv": ("target_from_A", "target_adv"),
          "offpolicy_mask": ("off_policy", "p_old"), "task_value": ("task_value",)}
# Inputs a grid cannot have, and why (an objective needing one is listed by `not_drawable`, never dropped).
NOT_ON_A_GRID = {
    "head": "the LM head (its weight, its input h_t and the optimizer's Adam moments): CAPO predicts each token's "
            "KL and objective shift after the coming optimizer step, a property of the model and the optimizer "
            "state, not of (r, A)",
    "response_ids": "the sampled token ids, to read their logits off the LM head",
}
BACKGROUND_ENTROPY = (0.01, 2.0, 99)  # nats, count: the other tokens of a grid token's batch, log-uniform
# Parameters a grid holds fixed, and why (the explorer lists them; `hp` may still set them).
GRID_HELD = {
    "bapo": ({"step_low": 0.0, "step_high": 0.0, "c_low_max": 1.0, "c_high_max": 10.0, "rho0": 0.0},
             "bounds held at (c_low, c_high): BAPO searches them per minibatch from that minibatch's own tokens, "
             "which a grid is not (section 3 runs the search on real rollouts)"),
}


def knob_names(key: str) -> list[str]:
    """The knobs that set the inputs objective `key` reads, in INPUTS order."""
    reads = set(required_inputs(registry.get("objective", key).fn))
    return [k for name, knobs in INPUTS.items() if name in reads for k in knobs]


def knob_defaults(key: str) -> dict:
    return {k: KNOBS[k].default for k in knob_names(key)}


# ----------------------------------------------------------------------------------------------------
# The surface


def default_weight_ratios() -> np.ndarray:
    # Step 0.05 offset by 0.025: no point lands on a clip edge (0.8, 1.2, 1.28, e^±0.4 ...) or on a
    # dual-clip cap (1.5, 2, 3, ...), where max()/clamp ties would split the gradient.
    return np.linspace(0.025, 3.975, 80)


def default_weight_advantages() -> np.ndarray:
    return np.round(np.linspace(-1.0, 1.0, 21), 10)  # step 0.1, includes 0 and +-1


def grid_axes(ratios=None, advantages=None) -> tuple[np.ndarray, np.ndarray]:
    """(ratios, advantages) of a (r, A) grid as flat float arrays, the defaults where None."""
    ratios = default_weight_ratios() if ratios is None else np.asarray(ratios, dtype=float).flatten()
    advantages = default_weight_advantages() if advantages is None else np.asarray(advantages, dtype=float).flatten()
    return ratios, advantages


def background_entropy(copies: int = 1) -> torch.Tensor:
    """The other tokens' entropies of a grid token's batch: BACKGROUND_ENTROPY's count, log-uniform on its range,
    each repeated `copies` times (one set per grid cell) [count * copies]."""
    lo, hi, count = BACKGROUND_ENTROPY
    return torch.logspace(math.log10(lo), math.log10(hi), count, dtype=torch.float64).repeat_interleave(copies)


def grid_batch(key: str, ratios=None, advantages=None, inputs: Mapping | None = None) -> dict:
    """The batch `gradient_weight_surface` feeds objective `key`: one one-token row per (A, r) cell, then
    (entropy-reading objectives only) background rows with r = 1 and A = 0, which carry no gradient but make up the
    batch whose entropy statistics the objective computes: `background_entropy(n)`, one copy of the 99 background
    entropies per cell, so the batch is n copies of one 100-token batch and its quantiles, mean square and extremes
    (HAPO's pivot, spread and max / min, AEPO's top-rho threshold) are those of that 100-token batch for every grid
    size.

    Returns {"leaf": logp of the cells [N, 1] (requires grad), "logp", "old_logp", "advantages", "mask" (all rows),
    "kw": the extra keyword inputs, "knobs": the knob values used, "shape": (len(A), len(r)), "p": p = r p_old of
    the cells [len(A), len(r)]}.
    """
    entry = registry.get("objective", key)
    reason = why_not_drawable(key)
    if reason:
        raise NotDrawable(f"{key}: {reason}")
    knobs = knob_defaults(key)
    unknown = sorted(set(inputs or {}) - set(knobs))
    if unknown:
        raise ValueError(f"{key} takes the grid inputs {sorted(knobs) or 'none'}, not {unknown}")
    knobs.update(inputs or {})
    r, a = (torch.as_tensor(x, dtype=torch.float64) for x in grid_axes(ratios, advantages))
    if bool((r <= 0).any()):
        raise ValueError("ratios must be > 0 (r = pi / pi_old)")
    A, R = torch.meshgrid(a, r, indexing="ij")
    n = A.numel()
    p_old = float(knobs.get("p_old", 1.0))
    old_cells = torch.full((n, 1), math.log(p_old), dtype=torch.float64)
    leaf = (old_cells + R.reshape(-1, 1).log()).requires_grad_(True)
    reads = set(required_inputs(entry.fn))
    extra = BACKGROUND_ENTROPY[2] * n if "entropy" in reads else 0  # background rows (A = 0, r = 1)
    old = torch.cat([old_cells, torch.zeros(extra, 1, dtype=torch.float64)])
    logp = torch.cat([leaf, old[n:]])
    adv = torch.cat([A.reshape(-1, 1), torch.zeros(extra, 1, dtype=torch.float64)])
    mask = torch.ones_like(old)
    kw = {}
    if "mu_logp" in reads:
        kw["mu_logp"] = old - math.log(float(knobs["old_over_mu"]))
    if "entropy" in reads:
        kw["entropy"] = torch.cat([torch.full((n, 1), float(knobs["entropy"]), dtype=torch.float64),
                                   background_entropy(n)[:, None]])
    if "target_adv" in reads:
        kw["target_adv"] = adv.clone() if knobs["target_from_A"] else torch.full_like(adv, float(knobs["target_adv"]))
    if "offpolicy_mask" in reads:
        kw["offpolicy_mask"] = torch.full_like(adv, 1.0 if knobs["off_policy"] else 0.0)
    if "task_value" in reads:
        kw["task_value"] = torch.full((adv.shape[0],), float(knobs["task_value"]), dtype=torch.float64)
    return {"leaf": leaf, "logp": logp, "old_logp": old, "advantages": adv, "mask": mask, "kw": kw, "knobs": knobs,
            "shape": tuple(A.shape), "p": (R * p_old).numpy(), "n": n}


def grid_hp(key: str, hp: Mapping) -> dict:
    """The objective's keyword arguments on the grid: GRID_HELD's settings, then `hp`."""
    return {**GRID_HELD.get(key, ({}, ""))[0], **hp}


def gradient_weight(key: str, leaf: torch.Tensor, logp, old_logp, advantages, mask, **kw) -> tuple[torch.Tensor, dict]:
    """(d(-L)/d leaf, the objective's metrics): objective `key` called once on (logp, old_logp, advantages, mask) with
    its own default aggregation (`entry.defaults["agg"]`, which gspo / geo_mean / luspo require) and unit
    denominators, so the aggregated loss is the plain sum of the token losses and autograd gives each token its own
    weight. `leaf`: the tensor logp is built from (the tokens whose weight is wanted); `kw`: the objective's inputs
    and settings. Zeros where the loss does not read logp at all."""
    entry = registry.get("objective", key)
    loss, metrics = entry.fn(logp, old_logp, advantages, mask, agg=entry.defaults.get("agg", "token-mean"), denom=UNIT,
                             **kw)
    (grad,) = torch.autograd.grad(-loss, leaf, allow_unused=True)
    return (torch.zeros_like(leaf) if grad is None else grad), metrics


def gradient_weight_surface(key: str, ratios=None, advantages=None, inputs: Mapping | None = None,
                            **hp) -> np.ndarray:
    """Per-token gradient weight d(-l)/d(log pi) of a registered policy objective on a grid, [len(A), len(r)].

    Every (A, r) pair is one sequence of ONE token (old_logp = log p_old, 0 unless the objective reads
    offpolicy_mask; logp = old_logp + log r), so sequence-level objectives (gspo, luspo, geo_mean) reduce to their
    per-token form. The objective is called once on the whole grid (`gradient_weight`), with the inputs it reads
    beyond its signature from `grid_batch` (`inputs`: knob name -> value, defaults `KNOBS`): mu_logp = old_logp -
    log(pi_old/mu) (at the default, mu = pi_old: no engine/trainer mismatch), a token entropy within a background
    batch, GBPO's target advantage, the off-policy flag, VSPO's task value. `hp` goes to the objective after
    GRID_HELD's settings (eps_low, eps_high, dual_clip_c, tau_pos, ...). Cells with p = r p_old > 1
    (policy-shaping's off-policy tokens, whose weight reads p) are NaN. Raises NotDrawable for an objective whose
    inputs a grid cannot set (see `not_drawable`).

    For ppo-clip the weight is A r where the unclipped branch is active and 0 where the clipped one is.
    """
    g = grid_batch(key, ratios, advantages, inputs)
    grad, _ = gradient_weight(key, g["leaf"], g["logp"], g["old_logp"], g["advantages"], g["mask"], **g["kw"],
                              **grid_hp(key, hp))
    w = grad.reshape(g["shape"]).detach().double().numpy()
    if "offpolicy_mask" in g["kw"] and g["knobs"]["off_policy"]:
        w = np.where(g["p"] > 1.0, np.nan, w)
    return w


def grid_note(key: str, inputs: Mapping | None = None, **hp) -> str:
    """One line on what the inputs and held settings mean for objective `key` on the grid, computed with the
    objective's own helpers (HAPO's normalized entropy and bounds, AEPO's high-entropy set, GBPO's target ratio,
    VSPO's clip scale, the IS weights); "" when there is nothing to say."""
    entry = registry.get("objective", key)
    setting = {**entry.defaults, **grid_hp(key, hp)}
    knobs = {**knob_defaults(key), **(inputs or {})}
    parts = []
    if key == "bapo":
        parts.append(f"bounds held at c_low = {setting['c_low']:g}, c_high = {setting['c_high']:g} (the search is per "
                     "batch)")
    elif key in GRID_HELD:
        parts.append(GRID_HELD[key][1].split(":")[0])
    if "entropy" in knobs:
        g = grid_batch(key, [1.0], [1.0], inputs)
        ent, mask = g["kw"]["entropy"], g["mask"]
        if key == "hapo":
            from workbench.objectives.hapo import adaptive_clip_bounds, entropy_stats, normalized_entropy

            stats = entropy_stats(ent, mask, pivot_quantile=setting["entropy_pivot"])
            h = normalized_entropy(ent[:1], stats, reference_bug=setting["reference_bug"])
            low, high = adaptive_clip_bounds(h, setting["eps_low"], setting["eps_high"], setting["clip_alpha"])
            parts.append(f"H = {knobs['entropy']:.3g}: ĥ = {float(h):+.2f}, bounds [1 − {float(low):.3f}, "
                         f"1 + {float(high):.3f}]")
        elif key == "aepo-agentic-clip":
            from workbench.objectives.aepo_clip import high_entropy_tokens

            high = bool(high_entropy_tokens(ent, mask, setting["top_entropy_quantile"])[0, 0])
            parts.append(f"H = {knobs['entropy']:.3g} is {'in' if high else 'not in'} the top "
                         f"{setting['top_entropy_quantile']:.0%} of its batch"
                         + (": clipped A > 0 tokens keep a gradient" if high else ": plain PPO-clip"))
    if "target_adv" in required_inputs(entry.fn):
        from workbench.objectives.gbpo import target_ratio

        def rho(x):
            return float(target_ratio(torch.tensor([x]), eps_low=setting["eps_low"], eps_high=setting["eps_high"]))
        parts.append(f"ρ* = 1 − ε_low + (ε_low + ε_high)σ(A): {rho(-1):.3f} at A = −1, {rho(1):.3f} at A = +1"
                     if knobs["target_from_A"] else f"ρ* = {rho(knobs['target_adv']):.3f} on every row")
    if "task_value" in knobs:
        from workbench.objectives.vspo import clip_scale

        s = float(clip_scale(torch.tensor([knobs["task_value"]]), value_smoothing=setting["value_smoothing"]))
        parts.append(f"v = {knobs['task_value']:.3g}: band scale s = {s:.2f}, [1 − {s * setting['eps_low']:.3f}, "
                     f"1 + {s * setting['eps_high']:.3f}]")
    if "old_over_mu" in knobs:
        w = float(knobs["old_over_mu"])
        if key == "hispo":
            kept = abs(math.log(w)) <= setting["delta_seq"]
            lo, hi = (1 - setting["mask_eps_low"]) / w, (1 + setting["mask_eps_high"]) / w
            parts.append(f"π_old/μ = {w:.3g}: sequence {'kept' if kept else 'masked (|log π_old/μ| > δ)'}; tokens "
                         f"kept for r in [{lo:.3f}, {hi:.3f}]")
        elif key == "r2vpo":
            cap = setting["is_cap"]
            weight = min(w, cap) if cap is not None else 1.0
            parts.append(f"π_old/μ = {w:.3g}: weight {weight:.3g}, λ = {setting['lam']:g}")
        else:
            parts.append(f"π_old/μ = {w:.3g}" + (" (fresh data)" if w == 1 else ""))
    if "off_policy" in knobs:
        parts.append(f"off-policy token, p = r · {knobs['p_old']:.3g}: w = A γp/(p + γ)²" if knobs["off_policy"]
                     else "on-policy token: PPO-clip")
    return "; ".join(parts)


# ----------------------------------------------------------------------------------------------------
# Drawing: one objective, a grid of them, slices


def hp_label(hp: Mapping) -> str:
    return ", ".join(f"{k}={v:g}" if is_number(v) else f"{k}={v}" for k, v in hp.items())


def inputs_label(key: str, inputs: Mapping | None) -> str:
    changed = {k: v for k, v in (inputs or {}).items() if k not in KNOBS or KNOBS[k].default != v}
    return hp_label(changed)


def weight_heatmaps(key, ratios, advantages, hp, coloraxis: str | None, inputs: Mapping | None = None):
    """(weight heatmap, zero-gradient overlay, surface) for one objective: the surface on its own colour scale
    (`coloraxis` None) or on a shared one; grey where the weight is exactly 0 with A != 0, blank where a cell is
    impossible (NaN)."""
    w = gradient_weight_surface(key, ratios, advantages, inputs, **hp)
    # 1 where the weight is exactly 0 (and A != 0), drawn grey; 0 transparent. uint8 / float32 keep the
    # figure JSON (base64 arrays) small.
    zero = ((np.abs(w) < 1e-12) & (np.abs(np.asarray(advantages))[:, None] > 0)).astype(np.uint8)
    heat = go.Heatmap(x=ratios, y=advantages, z=w.astype(np.float32), name=key, zmid=0 if coloraxis is None else None,
                      colorscale=SIGNED_SCALE if coloraxis is None else None, coloraxis=coloraxis,
                      colorbar=dict(title="∂(−ℓ)/∂log π") if coloraxis is None else None, hoverongaps=False,
                      hovertemplate=f"{html.escape(key)}<br>r %{{x:.3f}}<br>A %{{y:+.3f}}<br>"
                                    "weight %{z:.4g}<extra></extra>")
    overlay = go.Heatmap(x=ratios, y=advantages, z=zero, zmin=0, zmax=1, showscale=False, hoverinfo="skip",
                         colorscale=[[0, "rgba(0,0,0,0)"], [0.5, "rgba(0,0,0,0)"], [0.5, ZERO_COLOR], [1, ZERO_COLOR]],
                         name="zero gradient")
    return heat, overlay, w


def weight_and_slices(heat, overlay, ratios, slices, *, widths=(0.55, 0.45), spacing=0.14) -> go.Figure:
    """Left: a weight heatmap over (r, A) with its zero-gradient overlay, its colour bar in the gap after it; right:
    `slices` [2, len(r)], the weights at A = +1 and A = -1, its y axis on its right so that the gap holds the colour
    bar alone. Four traces and fixed shapes, so a widget can redraw it in place; the caller sets the title."""
    left_end = widths[0] / sum(widths) * (1 - spacing)  # where make_subplots ends the left panel
    heat.colorbar = dict(title="weight", x=left_end + 0.01, xanchor="left", len=0.9, thickness=14)
    fig = make_subplots(rows=1, cols=2, column_widths=list(widths), horizontal_spacing=spacing,
                        subplot_titles=("weight over (r, A); grey = exactly 0", "slices at A = ±1"))
    fig.add_trace(heat, row=1, col=1)
    fig.add_trace(overlay, row=1, col=1)
    for row, (A, color) in enumerate(((1.0, POSITIVE), (-1.0, NEGATIVE))):
        fig.add_trace(go.Scatter(x=ratios, y=slices[row], name=f"A = {A:+g}", line=dict(color=color),
                                 hovertemplate="r %{x:.3f}<br>weight %{y:.4g}<extra></extra>"), row=1, col=2)
    shapes = [dict(type="line", x0=1, x1=1, xref=ax, y0=0, y1=1, yref=f"{ax.replace('x', 'y')} domain",
                   line=dict(color=NEUTRAL, dash="dot", width=1)) for ax in ("x", "x2")]
    fig.update_xaxes(title_text="ratio r = π / π_old")
    fig.update_yaxes(title_text="advantage A", row=1, col=1)
    fig.update_yaxes(title_text="∂(−ℓ)/∂log π", side="right", row=1, col=2)
    fig.update_layout(template="plotly_white", shapes=shapes, legend=dict(orientation="h", x=0.6, y=-0.18))
    return fig


def gradient_weight_figure(key: str = "ppo-clip", ratios=None, advantages=None, **hp) -> go.Figure:
    """Left: the weight d(-l)/d(log pi) over (r, A) as a heatmap, grey where it is exactly 0.
    Right: slices at A = +1 and A = -1. Four traces and fixed shapes, so a widget can redraw it in place."""
    ratios, advantages = grid_axes(ratios, advantages)
    heat, overlay, _ = weight_heatmaps(key, ratios, advantages, hp, None)
    fig = weight_and_slices(heat, overlay, ratios, gradient_weight_surface(key, ratios, [1.0, -1.0], **hp))
    title = f"{key}: per-token gradient weight" + (f" ({hp_label(hp)})" if hp else "")
    fig.update_layout(title=title, height=430)
    return fig


def surface_figure(key: str = "bapo", ratios=None, advantages=None, inputs: Mapping | None = None, **hp) -> go.Figure:
    """Left: d(-l)/d(log pi) over (r, A), grey where exactly 0 (blank: impossible cells). Right: slices at A = +-1.
    The title names the settings and, below, what the inputs mean (`grid_note`). Four traces and fixed shapes, so
    `beyond_explorer` redraws it in place."""
    ratios, advantages = grid_axes(ratios, advantages)
    heat, overlay, _ = weight_heatmaps(key, ratios, advantages, hp, None, inputs)
    fig = weight_and_slices(heat, overlay, ratios, gradient_weight_surface(key, ratios, [1.0, -1.0], inputs, **hp))
    defaults = registry.get("objective", key).defaults
    changed = {k: v for k, v in hp.items() if k not in defaults or defaults[k] != v}  # the explorer passes them all
    label = ", ".join(s for s in (hp_label(changed), inputs_label(key, inputs)) if s)
    note = grid_note(key, inputs, **hp)
    title = f"{key}: per-token gradient weight" + (f" ({label})" if label else "")
    if note:
        title += "<br><sup>" + "<br>".join(html.escape(line) for line in textwrap.wrap(note, 120)[:2]) + "</sup>"
    fig.update_layout(title=title, height=450, margin=dict(t=100))
    return fig


def panel_spec(panel) -> tuple[str, dict, dict]:
    """(key, hp, inputs) of a grid panel given as "key", (key, hp) or (key, hp, inputs): the one shape both grids
    read, so a panel's grid inputs are never dropped."""
    if isinstance(panel, str):
        return panel, {}, {}
    if not isinstance(panel, (tuple, list)) or not 2 <= len(panel) <= 3 or not isinstance(panel[0], str):
        raise ValueError(f"a panel is a key, (key, hp) or (key, hp, inputs), got {panel!r}: e.g. 'ppo-clip', "
                         "('ppo-clip', {'eps_high': 0.28}) or ('hapo', {}, {'entropy': 2.0})")
    key, hp, *inputs = panel
    return key, dict(hp), dict(inputs[0]) if inputs else {}


def heatmap_grid(panels: Sequence[tuple[str, Callable]], cols: int, vertical_spacing: float = 0.3,
                 horizontal_spacing: float = 0.06) -> tuple[go.Figure, int, float]:
    """(figure, rows, peak |weight|): one subplot per (title, make) panel, `make()` -> (heatmap, zero overlay, weights)
    drawn on the shared colour axis "coloraxis" with a dotted line at r = 1; a panel whose `make` raises shows the
    error instead (a new objective never breaks the grid). The caller sets the title, height and colour axis."""
    cols = max(1, min(cols, len(panels)))
    rows = max(1, math.ceil(len(panels) / cols))
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[t for t, _ in panels] or None,
                        horizontal_spacing=horizontal_spacing, vertical_spacing=min(0.4 * vertical_spacing,
                                                                                    vertical_spacing / rows))
    peak, notes = 0.0, []
    for i, (_, make) in enumerate(panels):
        row, col = i // cols + 1, i % cols + 1
        try:
            heat, overlay, w = make()
        except Exception as err:  # noqa: BLE001 - shown in the panel
            n = i + 1
            notes.append(dict(x=0.5, y=0.5, xref=f"x{n if n > 1 else ''} domain", yref=f"y{n if n > 1 else ''} domain",
                              text="<br>".join(textwrap.wrap(f"{type(err).__name__}: {err}", 40)[:6]),
                              showarrow=False, font=dict(size=10, color=NEGATIVE)))
            continue
        peak = max(peak, float(np.nanmax(np.abs(w))))
        fig.add_trace(heat, row=row, col=col)
        fig.add_trace(overlay, row=row, col=col)
    shapes = [dict(type="line", x0=1, x1=1, xref=f"x{i + 1 if i else ''}", y0=0, y1=1,
                   yref=f"y{i + 1 if i else ''} domain", line=dict(color="black", dash="dot", width=1))
              for i in range(len(panels))]
    title_step_axes(fig, len(panels), cols, "ratio r")  # under the last panel of each column
    for r_ in range(1, rows + 1):
        fig.update_yaxes(title_text="A", row=r_, col=1)
    fig.update_layout(annotations=[*fig.layout.annotations, *notes], shapes=shapes, template="plotly_white")
    return fig, rows, peak


def gradient_weight_grid(panels: Sequence | None = None, ratios=None, advantages=None, cols: int = 3,
                         title: str | None = None) -> go.Figure:
    """One heatmap of d(-l)/d(log pi) over (r, A) per objective, one shared colour scale, zeros in grey.

    panels: objective keys, (key, hp) or (key, hp, inputs) (`panel_spec`); default: every registered policy
    objective at its defaults. A panel whose objective raises shows the error message instead (a new objective never
    breaks the grid).
    """
    panels = [panel_spec(p) for p in (panels if panels is not None else [e.key for e in policy_objectives()])]
    ratios, advantages = grid_axes(ratios, advantages)
    settings = [", ".join(s for s in (hp_label(hp), inputs_label(key, inp)) if s) for key, hp, inp in panels]
    # a panel's settings under its name, wrapped to the panel's width; the rows move apart to hold them
    cells = [(key + ("<br><span style='font-size:10px'>" + "<br>".join(textwrap.wrap(setting, 36)) + "</span>"
                     if setting else ""),
              lambda key=key, hp=hp, inp=inp: weight_heatmaps(key, ratios, advantages, hp, "coloraxis", inp))
             for (key, hp, inp), setting in zip(panels, settings)]
    lines = max((len(textwrap.wrap(setting, 36)) for setting in settings), default=0)
    fig, rows, peak = heatmap_grid(cells, cols, vertical_spacing=0.3 + 0.15 * lines)
    fig.update_layout(  # the title at the top, clear of panel names that grow upwards by their settings' lines
        title=dict(y=1, yanchor="top", pad=dict(t=25), text=title or "per-token gradient weight ∂(−ℓ)/∂log π "
                   "(blue: up, red: down, grey: exactly zero)"),
        height=max(360, (270 + 25 * lines) * rows), margin=dict(t=90 + 25 * lines),
        coloraxis=dict(colorscale=SIGNED_SCALE, cmin=-(peak or 1), cmax=peak or 1, cmid=0,
                       colorbar=dict(title="weight")))
    return fig


def surface_grid(panels: Sequence | None = None, ratios=None, advantages=None, cols: int = 3,
                 title: str | None = None, families: Sequence[str] = (F2,)) -> go.Figure:
    """One heatmap of d(-l)/d(log pi) over (r, A) per panel, one shared colour scale, zeros grey.

    panels: keys, (key, hp) or (key, hp, inputs); default: every drawable objective of `families` (F2) at its
    defaults and default inputs, with the methods that have no surface (`not_drawable`) listed under the grid with
    their reasons. A panel whose objective raises shows the error message instead.
    """
    default = panels is None
    panels = [panel_spec(p) for p in (drawable_keys(families) if default else panels)]
    ratios, advantages = grid_axes(ratios, advantages)

    def label(key, hp, inp):
        extra = ", ".join(s for s in (hp_label(hp), inputs_label(key, inp)) if s)
        return key + (f"<br><sup>{html.escape(extra)}</sup>" if extra else "")

    cells = [(label(key, hp, inp), lambda key=key, hp=hp, inp=inp: weight_heatmaps(key, ratios, advantages, hp,
                                                                                   "coloraxis", inp))
             for key, hp, inp in panels]
    fig, rows, peak = heatmap_grid(cells, cols, vertical_spacing=0.35, horizontal_spacing=0.05)
    notes, missing = [], not_drawable(families) if default else {}
    bottom = 40
    if missing:  # one wrapped paragraph per method, as wide as the figure
        lines = ["<b>not drawn</b>: " + "<br>".join(textwrap.wrap(html.escape(f"{k}: {textwrap.shorten(v, 150)}"), 110,
                                                                   break_on_hyphens=False)) for k, v in missing.items()]
        notes.append(dict(x=0, y=0, xref="paper", yref="paper", yshift=-70, xanchor="left", yanchor="top",
                          align="left", showarrow=False, font=dict(size=11), text="<br>".join(lines)))
        bottom = 90 + 17 * sum(line.count("<br>") + 1 for line in lines)
    fig.update_layout(
        title=title or "F2 objectives: per-token gradient weight ∂(−ℓ)/∂log π at the defaults"
                       "<br><sup>blue: up, red: down, grey: exactly zero</sup>",
        height=max(380, 280 * rows) + bottom, annotations=[*fig.layout.annotations, *notes], margin=dict(b=bottom),
        coloraxis=dict(colorscale=SIGNED_SCALE, cmin=-(min(peak, COLOR_CAP) or 1), cmax=min(peak, COLOR_CAP) or 1,
                       cmid=0, colorbar=dict(title="weight" + (f"<br>(±{COLOR_CAP:g}:<br>saturated)"
                                                               if peak > COLOR_CAP else ""))))
    return fig


def gradient_weight_slices(keys: Sequence[str] | None = None, ratios=None, advantages=(1.0, -1.0),
                           hp: Mapping[str, Mapping] | None = None) -> go.Figure:
    """d(-l)/d(log pi) against r at fixed advantages (one subplot per A), one line per objective.

    Objectives whose curves coincide on the whole grid share one line, named "a = b = c", so overlapping
    lines cannot hide each other.
    """
    keys = list(keys) if keys is not None else [e.key for e in policy_objectives()]
    ratios, _ = grid_axes(ratios)
    hp = dict(hp or {})
    curves: list[tuple[list[str], np.ndarray]] = []
    for key in keys:
        w = gradient_weight_surface(key, ratios, advantages, **hp.get(key, {}))
        same = next((c for c in curves if np.allclose(c[1], w, atol=1e-9)), None)
        if same is not None:
            same[0].append(key)
        else:
            curves.append(([key], w))
    fig = make_subplots(rows=1, cols=len(advantages), subplot_titles=[f"A = {a:+g}" for a in advantages],
                        horizontal_spacing=0.08)
    dashes = ("solid", "dash", "dot", "dashdot")
    for i, (names, w) in enumerate(curves):
        name = " = ".join(names)
        line = dict(color=RUN_COLORS[i % len(RUN_COLORS)], dash=dashes[(i // len(RUN_COLORS)) % len(dashes)])
        for j in range(len(advantages)):
            fig.add_trace(go.Scatter(x=ratios, y=w[j], name=name, legendgroup=name, showlegend=j == 0, line=line,
                                     hovertemplate=f"{html.escape(name)}<br>r %{{x:.3f}}<br>weight %{{y:.4g}}"
                                                   "<extra></extra>"),
                          row=1, col=j + 1)
    fig.update_xaxes(title_text="ratio r = π / π_old")
    fig.update_yaxes(title_text="∂(−ℓ)/∂log π", row=1, col=1)
    fig.update_layout(title="gradient weight against the ratio (objectives with identical curves share a line)",
                      template="plotly_white", height=440, legend=dict(orientation="h", y=-0.25))
    return fig
