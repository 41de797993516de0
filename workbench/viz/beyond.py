"""Figures for notebook 10, "beyond the clip": the trust regions of family F2 (`surrogate`) next to F1's.

- `weight_surface`: the per-token gradient weight d(-l)/d(log pi) of ANY drawable F1/F2 policy objective over
  (r, A), by autograd through the registered function, including objectives that read more than (logp,
  old_logp, advantages, mask): each such input gets an explicit, documented grid setting (`KNOBS`, `INPUTS`);
  `surface_figure`, `surface_grid` and `beyond_explorer` draw it (one control per numeric parameter of the chosen
  objective, built from its registered defaults, plus its input knobs). `not_drawable` lists, with the reason,
  what cannot be drawn on a (r, A) grid.
- `token_weights` / `contribution_summary` / `contribution_figure` / `silenced_scatter`: the same weight on the
  tokens of a real batch; the share of the gradient carried by A > 0 and A < 0 tokens and the tokens an objective
  silences (BAPO's positive share is the motivating quantity).
- `bapo_bounds_figure`, `dual_ascent_figure`: BAPO's searched bounds and R²VPO's dual variable over a run.
- `equations_markdown`: the family's key equations from the registry (the claims table is `workbench.viz.claims`).

Pure functions (data in, `go.Figure` or HTML text out), except `beyond_explorer` (ipywidgets).

    from workbench.viz.beyond import weight_surface, surface_grid, beyond_explorer
"""
from __future__ import annotations

import html
import inspect
import math
import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from workbench import ops, registry
from workbench.viz.figures import NEGATIVE, POSITIVE, RUN_COLORS, is_number, metric_series, to_numpy
from workbench.viz.zoo import (WEIGHT_SCALE, ZERO_COLOR, default_weight_advantages, default_weight_ratios, heatmap_grid,
                               hp_label, weight_and_slices)

FAMILIES = ("canonical", "surrogate")  # F1 and F2 (data/catalog.tsv's family column)
F2 = "surrogate"
COLOR_CAP = 4.0  # the shared colour scale of a grid stops at |w| = 4 (= max |A r| on the default grid)
UNIT = ops.Denominators(num_tokens=1.0, num_seqs=1.0, norm_constant=1.0)  # aggregated loss = sum of token losses


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
NO_CONTROL = {"eps": "a numerical floor", "seed": "a random seed", "logr_clamp": "a clamp of log r far outside "
              "the grid", "top_k": "CAPO only"}
DUAL_CLIP_OPTIONS = (("off", 0.0), ("1.5", 1.5), ("2", 2.0), ("3", 3.0), ("5", 5.0), ("10", 10.0))
# Slider ranges by parameter name: ("log", lo, hi) | ("linear", lo, hi, step) | ("select", options) | ("int", lo, hi).
# Other numeric parameters get a log slider over [d/10, 10 d] around their default d (linear [0, 1] for d = 0).
RANGES = {
    "eps_low": ("log", 1e-4, 0.9), "eps_high": ("log", 1e-4, 1.0),
    "mask_eps_low": ("log", 1e-3, 0.9), "mask_eps_high": ("log", 1e-3, 1.0),
    "eps_low_pos": ("log", 1e-3, 0.9), "eps_high_pos": ("log", 1e-3, 1.0),
    "eps_low_neg": ("log", 1e-3, 0.9), "eps_high_neg": ("log", 1e-3, 1.0),
    "tau_pos": ("log", 0.05, 20.0), "tau_neg": ("log", 0.05, 20.0), "gamma": ("log", 0.01, 1.0),
    "inv_t": ("log", 0.1, 10.0), "cap_abs": ("linear", 1.0, 6.0, 0.1), "cap": ("linear", 1.0, 5.0, 0.1),
    "is_cap": ("linear", 1.0, 5.0, 0.1), "lam": ("linear", 0.0, 5.0, 0.05),
    "c_low": ("linear", 0.3, 1.0, 0.01), "c_high": ("linear", 1.0, 3.0, 0.01),
    "c_low_max": ("linear", 0.3, 1.0, 0.01), "c_high_max": ("linear", 1.0, 3.0, 0.01),
    "step_low": ("linear", 0.0, 0.2, 0.01), "step_high": ("linear", 0.0, 0.2, 0.01),
    "rho0": ("linear", 0.0, 0.95, 0.05),
    "value_smoothing": ("linear", 0.0, 1.0, 0.05), "clip_alpha": ("linear", 0.0, 3.0, 0.05),
    "adv_beta": ("linear", 0.0, 1.0, 0.05), "entropy_pivot": ("linear", 0.0, 1.0, 0.05),
    "top_entropy_quantile": ("linear", 0.05, 1.0, 0.05), "delta_seq": ("linear", 0.05, 2.0, 0.05),
    "dual_clip_c": ("select", DUAL_CLIP_OPTIONS),
}


class NotDrawable(ValueError):
    """The objective reads an input a (r, A) grid cannot have."""


def family_objectives(families: Sequence[str] = FAMILIES) -> list:
    """Registered policy objectives (registry entries) of the given catalog families, sorted by key."""
    return [e for e in registry.entries("objective") if e.family in set(families)]


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


def knob_names(key: str) -> list[str]:
    """The knobs that set the inputs objective `key` reads, in INPUTS order."""
    reads = set(required_inputs(registry.get("objective", key).fn))
    return [k for name, knobs in INPUTS.items() if name in reads for k in knobs]


def knob_defaults(key: str) -> dict:
    return {k: KNOBS[k].default for k in knob_names(key)}


# ----------------------------------------------------------------------------------------------------
# The surface


def background_entropy(copies: int = 1) -> torch.Tensor:
    """The other tokens' entropies of a grid token's batch: BACKGROUND_ENTROPY's count, log-uniform on its range,
    each repeated `copies` times (one set per grid cell) [count * copies]."""
    lo, hi, count = BACKGROUND_ENTROPY
    return torch.logspace(math.log10(lo), math.log10(hi), count, dtype=torch.float64).repeat_interleave(copies)


def grid_batch(key: str, ratios=None, advantages=None, inputs: Mapping | None = None) -> dict:
    """The batch `weight_surface` feeds objective `key`: one one-token row per (A, r) cell, then (entropy-reading
    objectives only) background rows with r = 1 and A = 0, which carry no gradient but make up the batch whose
    entropy statistics the objective computes: `background_entropy(n)`, one copy of the 99 background entropies per
    cell, so the batch is n copies of one 100-token batch and its quantiles, mean square and extremes (HAPO's
    pivot, spread and max / min, AEPO's top-rho threshold) are those of that 100-token batch for every grid size.

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
    r = torch.as_tensor(default_weight_ratios() if ratios is None else ratios, dtype=torch.float64).flatten()
    a = torch.as_tensor(default_weight_advantages() if advantages is None else advantages,
                        dtype=torch.float64).flatten()
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


def weight_surface(key: str, ratios=None, advantages=None, inputs: Mapping | None = None, **hp) -> np.ndarray:
    """Per-token gradient weight d(-l)/d(log pi) of a registered F1/F2 objective on a grid, [len(A), len(r)].

    As `workbench.viz.zoo.gradient_weight_surface` (one one-token row per cell, old_logp = log p_old (0 unless the
    objective reads offpolicy_mask), the objective's default aggregation and unit denominators, so autograd returns
    each token's own weight), plus the inputs the objective reads (`inputs`: knob name -> value, defaults `KNOBS`):
    mu_logp = old_logp - log(pi_old/mu), a token entropy within a background batch, GBPO's target advantage, the
    off-policy flag, VSPO's task value. `hp` goes to the objective after GRID_HELD's settings. Cells with
    p = r p_old > 1 (policy-shaping's off-policy tokens, whose weight reads p) are NaN. Raises NotDrawable for an
    objective whose inputs a grid cannot set (see `not_drawable`).
    """
    entry = registry.get("objective", key)
    g = grid_batch(key, ratios, advantages, inputs)
    loss, _ = entry.fn(g["logp"], g["old_logp"], g["advantages"], g["mask"],
                       agg=entry.defaults.get("agg", "token-mean"), denom=UNIT, **g["kw"], **grid_hp(key, hp))
    (grad,) = torch.autograd.grad(-loss, g["leaf"], allow_unused=True)
    if grad is None:  # the loss does not depend on logp at all
        grad = torch.zeros_like(g["leaf"])
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


def surface_heatmaps(key, ratios, advantages, inputs, hp, coloraxis: str | None):
    """(weight heatmap, zero-gradient overlay, surface) of one objective (grey: exactly zero with A != 0)."""
    w = weight_surface(key, ratios, advantages, inputs, **hp)
    zero = ((np.abs(w) < 1e-12) & (np.abs(np.asarray(advantages))[:, None] > 0)).astype(np.uint8)
    heat = go.Heatmap(x=ratios, y=advantages, z=w.astype(np.float32), name=key, zmid=0 if coloraxis is None else None,
                      colorscale=WEIGHT_SCALE if coloraxis is None else None, coloraxis=coloraxis,
                      colorbar=dict(title="∂(−ℓ)/∂log π") if coloraxis is None else None, hoverongaps=False,
                      hovertemplate=f"{html.escape(key)}<br>r %{{x:.3f}}<br>A %{{y:+.3f}}<br>"
                                    "weight %{z:.4g}<extra></extra>")
    overlay = go.Heatmap(x=ratios, y=advantages, z=zero, zmin=0, zmax=1, showscale=False, hoverinfo="skip",
                         colorscale=[[0, "rgba(0,0,0,0)"], [0.5, "rgba(0,0,0,0)"], [0.5, ZERO_COLOR], [1, ZERO_COLOR]],
                         name="zero gradient")
    return heat, overlay, w


def inputs_label(key: str, inputs: Mapping | None) -> str:
    changed = {k: v for k, v in (inputs or {}).items() if KNOBS[k].default != v}
    return hp_label(changed)


def surface_figure(key: str = "bapo", ratios=None, advantages=None, inputs: Mapping | None = None, **hp) -> go.Figure:
    """Left: d(-l)/d(log pi) over (r, A), grey where exactly 0 (blank: impossible cells). Right: slices at A = +-1.
    The title names the settings and, below, what the inputs mean (`grid_note`). Four traces and fixed shapes, so
    `beyond_explorer` redraws it in place."""
    ratios = default_weight_ratios() if ratios is None else np.asarray(ratios, dtype=float).flatten()
    advantages = default_weight_advantages() if advantages is None else np.asarray(advantages, float).flatten()
    heat, overlay, _ = surface_heatmaps(key, ratios, advantages, inputs, hp, None)
    fig = weight_and_slices(heat, overlay, ratios, weight_surface(key, ratios, [1.0, -1.0], inputs, **hp))
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
    """A grid panel: "key", (key, hp) or (key, hp, inputs)."""
    if isinstance(panel, str):
        return panel, {}, {}
    key, hp, *rest = panel
    return key, dict(hp), dict(rest[0]) if rest else {}


def surface_grid(panels: Sequence | None = None, ratios=None, advantages=None, cols: int = 3,
                 title: str | None = None, families: Sequence[str] = (F2,)) -> go.Figure:
    """One heatmap of d(-l)/d(log pi) over (r, A) per panel, one shared colour scale, zeros grey.

    panels: keys, (key, hp) or (key, hp, inputs); default: every drawable objective of `families` (F2) at its
    defaults and default inputs, with the methods that have no surface (`not_drawable`) listed under the grid with
    their reasons. A panel whose objective raises shows the error message instead.
    """
    default = panels is None
    panels = [panel_spec(p) for p in (drawable_keys(families) if default else panels)]
    ratios = default_weight_ratios() if ratios is None else np.asarray(ratios, dtype=float).flatten()
    advantages = default_weight_advantages() if advantages is None else np.asarray(advantages, float).flatten()

    def label(key, hp, inp):
        extra = ", ".join(s for s in (hp_label(hp), inputs_label(key, inp)) if s)
        return key + (f"<br><sup>{html.escape(extra)}</sup>" if extra else "")

    cells = [(label(key, hp, inp), lambda key=key, hp=hp, inp=inp: surface_heatmaps(key, ratios, advantages, inp, hp,
                                                                                   "coloraxis"))
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
        coloraxis=dict(colorscale=WEIGHT_SCALE, cmin=-(min(peak, COLOR_CAP) or 1), cmax=min(peak, COLOR_CAP) or 1,
                       cmid=0, colorbar=dict(title="weight" + (f"<br>(±{COLOR_CAP:g}:<br>saturated)"
                                                               if peak > COLOR_CAP else ""))))
    return fig


# ----------------------------------------------------------------------------------------------------
# The explorer


def control_spec(name: str, default):
    """(kind, range) of the control for parameter `name` with registered default `default`, or None (no control).

    kind: "bool", "select" (dual_clip_c: off or a cap), "log", "linear" or "int". Numbers get RANGES' range or one
    around the default; booleans a checkbox; strings, None (but dual_clip_c) and NO_CONTROL parameters none.
    """
    if name in NO_CONTROL or name in ("agg", "denom"):
        return None
    if isinstance(default, bool):
        return ("bool", None)
    if name == "dual_clip_c":
        return RANGES[name]
    if not is_number(default):
        return None
    if name in RANGES:
        return RANGES[name]
    if isinstance(default, int):
        return ("int", 0, max(10, 4 * default))
    d = float(default)
    if d == 0:
        return ("linear", 0.0, 1.0, 0.01)
    return ("log", d / 10, d * 10) if d > 0 else ("linear", 2 * d, -2 * d, 0.01)


def explorer_spec(key: str) -> dict:
    """What `beyond_explorer` shows for objective `key`: {"params": name -> (control spec, default) for every
    parameter with a control, "knobs": its input knobs, "held": name -> value of every parameter without one,
    "held_reason": why GRID_HELD holds some}."""
    entry = registry.get("objective", key)
    held_hp, reason = GRID_HELD.get(key, ({}, ""))
    params, held = {}, {}
    for name, default in entry.defaults.items():
        spec = None if name in held_hp else control_spec(name, default)
        if spec is None:
            held[name] = held_hp.get(name, default)
        else:
            params[name] = (spec, default)
    return {"params": params, "knobs": [KNOBS[k] for k in knob_names(key)], "held": held, "held_reason": reason}


def make_control(name: str, spec, value):
    """An ipywidgets control for a parameter or knob, at `value` (clamped into its range)."""
    import ipywidgets as W

    kind = spec[0]
    common = dict(description=name, continuous_update=False, style={"description_width": "initial"},
                  layout=W.Layout(width="300px"))
    if kind == "bool":
        return W.Checkbox(value=bool(value), description=name, indent=False, layout=W.Layout(width="300px"))
    if kind == "select":
        options = list(spec[1])
        values = [v for _, v in options]
        v = 0.0 if value is None else float(value)
        if v not in values:
            options.append((f"{v:g}", v))
            options.sort(key=lambda o: o[1])
        return W.SelectionSlider(options=options, value=v, **common)
    if kind == "log":
        lo, hi = math.log10(spec[1]), math.log10(spec[2])
        return W.FloatLogSlider(value=min(max(float(value), spec[1]), spec[2]), base=10, min=lo, max=hi, step=0.02,
                                readout_format=".3g", **common)
    if kind == "int":
        return W.IntSlider(value=min(max(int(value), spec[1]), spec[2]), min=spec[1], max=spec[2], **common)
    return W.FloatSlider(value=min(max(float(value), spec[1]), spec[2]), min=spec[1], max=spec[2], step=spec[3],
                         readout_format=".3g", **common)


def knob_control(knob: Knob):
    spec = ("bool", None) if knob.scale == "bool" else (knob.scale, knob.lo, knob.hi) if knob.scale == "log" \
        else ("linear", knob.lo, knob.hi, knob.step)
    control = make_control(knob.name, spec, knob.default)
    control.description_tooltip = knob.doc
    return control


def control_value(name: str, control):
    value = control.value
    if name == "dual_clip_c":
        return value or None
    if isinstance(value, bool) or isinstance(value, int):
        return value
    return float(value)


def held_html(key: str, spec: dict) -> str:
    """The explorer's line under the controls: what is held, what the knobs mean."""
    held = ", ".join(f"{k}={v}" if not is_number(v) else f"{k}={v:g}" for k, v in spec["held"].items())
    lines = [f"<b>{html.escape(key)}</b>: {html.escape(' '.join(registry.get('objective', key).summary.split()))}"]
    if held:
        lines.append(f"held: {html.escape(held)}" + (f" ({html.escape(spec['held_reason'])})" if spec["held_reason"]
                                                   else ""))
    lines += [f"<code>{k.name}</code>: {html.escape(k.doc)}" for k in spec["knobs"]]
    return "<br>".join(f"<small>{line}</small>" for line in lines)


def beyond_explorer(objective: str = "bapo", families: Sequence[str] = FAMILIES):
    """Pick any drawable F1/F2 objective; one control per numeric (or boolean) parameter of THAT objective, from its
    registered defaults, plus one per input it reads (`KNOBS`), redrawing `surface_figure`. Choosing an objective
    rebuilds the controls at its defaults. Objectives that cannot be drawn are named under the dropdown with the
    reason. Returns an ipywidgets.VBox with `.figure`, `.controls` (name -> widget, the current objective's) and
    `.update` attached, as the explorers of `workbench.viz.widgets`."""
    import ipywidgets as W

    from workbench.viz.widgets import refresh

    keys = drawable_keys(families)
    choice = W.Dropdown(options=keys, value=objective if objective in keys else keys[0], description="objective")
    missing = not_drawable(families, methods=False)
    skipped = W.HTML("<small>not drawable: " + "; ".join(f"<code>{html.escape(k)}</code> ({html.escape(v)})"
                                                         for k, v in missing.items()) + "</small>" if missing else "")
    panel, info = W.HBox(), W.HTML()
    controls: dict = {"objective": choice}
    current: dict = {"params": {}, "knobs": {}}
    figure = go.FigureWidget(surface_figure(choice.value))

    def update(change=None):
        hp = {n: control_value(n, c) for n, c in current["params"].items()}
        inputs = {n: control_value(n, c) for n, c in current["knobs"].items()}
        try:
            fig = surface_figure(choice.value, inputs=inputs, **hp)
        except Exception as err:  # noqa: BLE001 - an invalid combination (e.g. c_low > c_low_max) is shown
            figure.layout.title = f"{choice.value}: {type(err).__name__}: {textwrap.shorten(str(err), 150)}"
            return
        refresh(figure, fig)

    def rebuild(change=None):
        spec = explorer_spec(choice.value)
        current["params"] = {n: make_control(n, s, d) for n, (s, d) in spec["params"].items()}
        current["knobs"] = {k.name: knob_control(k) for k in spec["knobs"]}
        for control in (*current["params"].values(), *current["knobs"].values()):
            control.observe(update, names="value")
        widgets = [*current["params"].values(), *current["knobs"].values()]
        per_col = max(1, math.ceil(len(widgets) / 3))
        panel.children = [W.VBox(widgets[i:i + per_col]) for i in range(0, len(widgets), per_col)]
        info.value = held_html(choice.value, spec)
        for name in [n for n in controls if n != "objective"]:
            del controls[name]
        controls.update(current["params"])
        controls.update(current["knobs"])
        update()

    choice.observe(rebuild, names="value")
    rebuild()
    box = W.VBox([W.HBox([choice]), skipped, panel, info, figure])
    box.figure, box.update, box.controls = figure, update, controls
    return box


# ----------------------------------------------------------------------------------------------------
# Positive vs negative contributions on real rollouts


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


def token_weights(key: str, batch, logp: torch.Tensor, **hp) -> tuple[np.ndarray, dict]:
    """(w [B, T], metrics): every token's gradient weight d(-L)/d(log pi_t) under objective `key` when the policy's
    log-probs of the batch's tokens are `logp` (e.g. re-scored after the policy moved) and old_logp, advantages and
    mask are the batch's. The objective runs once on the whole batch with its default aggregation and unit
    denominators (per-batch statistics such as BAPO's bound search see the whole batch); w is 0 off the mask."""
    entry = registry.get("objective", key)
    leaf = logp.detach().double().clone().requires_grad_(True)
    mask = batch.mask.double()
    kw = {k: (v.double() if torch.is_tensor(v) and v.is_floating_point() else v)
          for k, v in batch_inputs(key, batch).items()}
    loss, metrics = entry.fn(leaf, batch.old_logp.double(), batch.advantages.double(), mask,
                             agg=entry.defaults.get("agg", "token-mean"), denom=UNIT, **kw, **hp)
    (grad,) = torch.autograd.grad(-loss, leaf, allow_unused=True)
    w = torch.zeros_like(leaf) if grad is None else grad
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


# ----------------------------------------------------------------------------------------------------
# Adaptive bounds and dual variables over a run


def bapo_bounds_figure(rows: Sequence[Mapping], hp: Mapping | None = None) -> go.Figure:
    """Left: BAPO's searched bounds `bapo/c_low`, `bapo/c_high` per step (each step's mean over its optimizer steps),
    their start values and maxima dotted. Right: `bapo/pos_share` with the target rho0 dashed. `hp`: the run's
    objective settings over the registered defaults."""
    setting = {**registry.get("objective", "bapo").defaults, **(hp or {})}
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                        subplot_titles=("ratio bounds after the search", "positive share pos / (pos + neg)"))
    shapes = []
    for i, (key, start, top) in enumerate((("bapo/c_high", "c_high", "c_high_max"),
                                           ("bapo/c_low", "c_low", "c_low_max"))):
        xs, ys = metric_series(list(rows), key)
        color = RUN_COLORS[i]
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers", name=key, line=dict(color=color),
                                 hovertemplate=f"{key}<br>step %{{x}}<br>%{{y:.3f}}<extra></extra>"), row=1, col=1)
        for value, dash in ((setting[start], "dot"), (setting[top], "dash")):
            shapes.append(dict(type="line", x0=0, x1=1, xref="x domain", y0=value, y1=value, yref="y",
                               line=dict(color=color, dash=dash, width=1)))
    xs, ys = metric_series(list(rows), "bapo/pos_share")
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers", name="bapo/pos_share", line=dict(color=POSITIVE),
                             hovertemplate="step %{x}<br>pos_share %{y:.3f}<extra></extra>"), row=1, col=2)
    shapes.append(dict(type="line", x0=0, x1=1, xref="x2 domain", y0=setting["rho0"], y1=setting["rho0"], yref="y2",
                       line=dict(color="black", dash="dash", width=1)))
    fig.update_xaxes(title_text="step")
    fig.update_yaxes(title_text="r bound (dotted: start, dashed: max)", row=1, col=1)
    fig.update_yaxes(title_text=f"share (dashed: ρ0 = {setting['rho0']:g})", row=1, col=2)
    fig.update_layout(title="BAPO's adaptive bounds over the run", template="plotly_white", height=400,
                      shapes=shapes, legend=dict(orientation="h", y=-0.2))
    return fig


def dual_ascent_figure(runs: Mapping[str, tuple[Sequence[Mapping], float]],
                       key: str = "objective:r2vpo.lam", measured: str = "r2vpo/ratio_var") -> go.Figure:
    """Left: the dual variable a controller set per step (`key`), one line per run. Right: the measured quantity it
    reads (`measured`) with each run's budget delta dashed. runs: label -> (metric rows, delta)."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1, subplot_titles=(f"λ ({key})", f"{measured} vs δ"))
    shapes = []
    for i, (label, (rows, delta)) in enumerate(runs.items()):
        color = RUN_COLORS[i % len(RUN_COLORS)]
        for col, k in ((1, key), (2, measured)):
            xs, ys = metric_series(list(rows), k)
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers", name=label, legendgroup=label,
                                     showlegend=col == 1, line=dict(color=color),
                                     hovertemplate=f"{html.escape(label)}<br>step %{{x}}<br>%{{y:.4g}}<extra></extra>"),
                          row=1, col=col)
        shapes.append(dict(type="line", x0=0, x1=1, xref="x2 domain", y0=delta, y1=delta, yref="y2",
                           line=dict(color=color, dash="dash", width=1)))
    fig.update_xaxes(title_text="step")
    fig.update_yaxes(rangemode="tozero")
    fig.update_layout(title="R²VPO's dual ascent: λ rises while the ratio variance exceeds δ, decays otherwise",
                      template="plotly_white", height=400, shapes=shapes, legend=dict(orientation="h", y=-0.2))
    return fig


# ----------------------------------------------------------------------------------------------------
# Tables


def latex(equation: str) -> str:
    """An equation for inline math inside a Markdown table cell: one line, |...| as \\vert (a table row splits on
    every | before the math is read)."""
    return " ".join(equation.replace(r"\|", r"\Vert ").replace("|", r"\vert ").split())


LINE_BREAKS = (";", r"\quad", r",\ ")  # where a long equation may wrap (outside braces and environments)


def equation_lines(equation: str, width: int = 80) -> list[str]:
    """A registered equation cut into lines of about `width` characters of LaTeX, only at a top-level ";", "\\quad"
    or ",\\ " (never inside {...}, \\begin...\\end or \\left...\\right), so each line is valid LaTeX on its own."""
    text = " ".join(equation.split())
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        escaped = i > 0 and text[i - 1] == "\\"
        if re.match(r"\\(begin|left)(?![a-zA-Z])", text[i:]):
            depth += 1
        elif re.match(r"\\(end|right)(?![a-zA-Z])", text[i:]):
            depth -= 1
        elif text[i] == "{" and not escaped:
            depth += 1
        elif text[i] == "}" and not escaped:
            depth -= 1
        elif depth == 0 and not escaped:
            sep = next((s for s in LINE_BREAKS if text.startswith(s, i)), None)
            if sep is not None:
                keep = 0 if sep == r"\quad" else 1  # ";" and "," stay at the end of their line
                parts.append(text[start:i + keep].strip())
                start = i + len(sep)
                i += len(sep)
                continue
        i += 1
    parts.append(text[start:].strip())
    parts = [re.sub(r"^(\\ |\\quad|\s)+", "", part) for part in parts]  # no leading spaces on a new line
    lines: list[str] = []
    for part in filter(None, parts):
        if lines and len(lines[-1]) + len(part) + 1 <= width:
            lines[-1] = f"{lines[-1]}\\ {part}"
        else:
            lines.append(part)
    return lines


def table_text(text: str) -> str:
    """Plain text safe in a Markdown table cell: one line, | and * escaped."""
    return " ".join(text.split()).replace("|", r"\|").replace("*", r"\*")


def table_math(equation: str, width: int = 70) -> str:
    """Inline math for a table cell: the equation's `equation_lines` stacked left-aligned, | as \\vert."""
    if not equation.strip():
        return "&ndash;"
    lines = [latex(line) for line in equation_lines(equation, width)]
    body = lines[0] if len(lines) == 1 else r"\begin{array}{l} " + r" \\ ".join(lines) + r" \end{array}"
    return f"${body}$"


def equations_markdown(family: str = F2) -> str:
    """One Markdown table of every registered component of `family` (key, kind, equation and summary) from the registry,
    so new methods appear by themselves. Display it with IPython's Markdown (the notebook's cell asks myst-nb to read
    it as MyST, which has tables and $math$)."""
    rows = [e for e in registry.entries() if e.family == family and e.kind != "recipe"]
    # the summary sits under the equation (one wide column), so rows stay short in the book's narrow text column
    lines = ["| key | kind | key equation and summary |", "| --- | --- | --- |"]
    lines += [f"| `{e.key}` | {e.kind} | {table_math(e.equation)}<br>{table_text(e.summary)} |" for e in rows]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------------------
# GUI-Libra: an advantage modifier, so it has no surface of its own


def success_scale_figure(G: int = 8, settings=((0.5, 1.5), (0.0, 1.0), (1.0, 0.0))) -> go.Figure:
    """The factor GUI-Libra puts on a negative advantage against the group's success rate k/G, one line per
    (base, coef), computed by `workbench.advantages.gui_libra.success_scale` on a group of G answers, k right."""
    from workbench.advantages.gui_libra import success_scale

    fig = go.Figure()
    rates = np.arange(G + 1) / G
    for i, (base, coef) in enumerate(settings):
        scale = [float(success_scale(torch.tensor([1.0] * k + [0.0] * (G - k), dtype=torch.float64),
                                     torch.zeros(G, dtype=torch.long), base=base, coef=coef)[0]) for k in range(G + 1)]
        label = f"base {base:g}, coef {coef:g}" + (" (GUI-Libra)" if (base, coef) == (0.5, 1.5) else "")
        fig.add_trace(go.Scatter(x=rates, y=scale, mode="lines+markers", name=label,
                                 line=dict(color=RUN_COLORS[i % len(RUN_COLORS)], dash="solid" if i == 0 else "dot")))
    fig.update_layout(title="GUI-Libra: the weight of a negative advantage against the group's success rate"
                            "<br><sup>positive advantages keep 1</sup>",
                      xaxis_title=f"group success rate k/{G}", yaxis_title="scale on A < 0", yaxis_range=[-0.05, 1.05],
                      template="plotly_white", height=360, legend=dict(orientation="h", y=-0.25))
    return fig
