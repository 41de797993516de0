"""Explorers of the per-token gradient weight (`workbench.viz.weight_surfaces`) in ipywidgets: `zoo_explorer` (notebook
04: the clipping zoo's objectives, one fixed set of sliders, those an objective does not take disabled) and
`beyond_explorer` (notebook 10: any drawable F1/F2 objective, one control per numeric parameter of the chosen
objective from its registered defaults, plus one per grid input it reads). ipywidgets is imported inside each
explorer; each returns its VBox with `.figure`, `.controls` and `.update` (as the explorers of
`workbench.viz.widgets`).

    from workbench.viz.weight_explorers import zoo_explorer, beyond_explorer
"""
from __future__ import annotations

import html
import math
import textwrap
from collections.abc import Sequence

import plotly.graph_objects as go

from workbench import registry
from workbench.viz.style import is_number
from workbench.viz.weight_surfaces import (FAMILIES, GRID_HELD, KNOBS, Knob, drawable_keys, gradient_weight_figure,
                                           hp_label, knob_names, not_drawable, policy_objectives, surface_figure)


# ----------------------------------------------------------------------------------------------------
# The clipping zoo's explorer


# Slider ranges for the explorer: (widget kind, min, max, step or base). Each slider is enabled only for
# objectives that take the hyper-parameter with a numeric default (dual_clip_c: any objective taking it).
EXPLORER_HP = {
    "eps_low": ("log", -4, math.log10(0.9)),
    "eps_high": ("log", -4, 0.0),
    "tau_pos": ("log", -1.3, 1.3),
    "tau_neg": ("log", -1.3, 1.3),
    "dual_clip_c": ("select", (("off", 0.0), ("1.5", 1.5), ("2", 2.0), ("3", 3.0), ("3.5", 3.5))),
    "cap_abs": ("linear", 1.0, 6.0, 0.1),
}


def zoo_explorer(objective: str = "ppo-clip"):
    """Dropdown over every policy objective and sliders for ε_low, ε_high, τ_pos, τ_neg, the dual-clip cap c
    and CISPO's cap, redrawing `gradient_weight_figure`. Sliders an objective does not take are disabled;
    choosing an objective resets the sliders to its defaults. Returns an ipywidgets.VBox with `.figure`,
    `.controls` and `.update` attached (as the explorers of `workbench.viz.widgets`)."""
    import ipywidgets as W

    from workbench.viz.widgets import refresh

    keys = [e.key for e in policy_objectives()]
    choice = W.Dropdown(options=keys, value=objective if objective in keys else keys[0], description="objective")
    sliders = {}
    for name, spec in EXPLORER_HP.items():
        if spec[0] == "log":
            sliders[name] = W.FloatLogSlider(value=0.2, base=10, min=spec[1], max=spec[2], step=0.02,
                                             description=name, readout_format=".3g", continuous_update=False)
        elif spec[0] == "select":
            sliders[name] = W.SelectionSlider(options=list(spec[1]), value=0.0, description=name,
                                              continuous_update=False)
        else:
            sliders[name] = W.FloatSlider(value=spec[1], min=spec[1], max=spec[2], step=spec[3], description=name,
                                          continuous_update=False)
    state = {"hold": False}

    def applicable(key) -> dict:
        defaults = registry.get("objective", key).defaults
        return {n: defaults[n] for n in EXPLORER_HP if n in defaults and (is_number(defaults[n]) or n == "dual_clip_c")}

    def current_hp() -> dict:
        hp = {}
        for name in applicable(choice.value):
            value = sliders[name].value
            hp[name] = (value or None) if name == "dual_clip_c" else float(value)
        return hp

    figure = None  # built below, once the sliders hold the chosen objective's defaults

    def update(change=None):
        if not state["hold"] and figure is not None:
            refresh(figure, gradient_weight_figure(choice.value, **current_hp()))

    def reset(change=None):
        state["hold"] = True
        try:
            take = applicable(choice.value)
            for name, slider in sliders.items():
                slider.disabled = name not in take
                if name in take:
                    default = take[name]
                    if name == "dual_clip_c":
                        options = [v for _, v in slider.options]
                        slider.value = default if default in options else 0.0
                    elif isinstance(slider, W.FloatLogSlider):
                        slider.value = min(max(float(default), 10 ** slider.min), 10 ** slider.max)
                    else:
                        slider.value = min(max(float(default), slider.min), slider.max)
        finally:
            state["hold"] = False
        update()

    choice.observe(reset, names="value")
    for slider in sliders.values():
        slider.observe(update, names="value")
    reset()
    figure = go.FigureWidget(gradient_weight_figure(choice.value, **current_hp()))
    names = list(sliders)
    controls = W.HBox([W.VBox([choice, *[sliders[n] for n in names[:2]]]), W.VBox([sliders[n] for n in names[2:4]]),
                       W.VBox([sliders[n] for n in names[4:]])])
    box = W.VBox([controls, figure])
    box.figure, box.update = figure, update
    box.controls = {"objective": choice, **sliders}
    return box


# ----------------------------------------------------------------------------------------------------
# Any drawable F1/F2 objective, its controls built from its registered defaults


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
    held = hp_label(spec["held"])
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
