"""ipywidgets explorers around the figures. ipywidgets is imported inside each function, so
`import workbench.viz` works in a plain Python process; the explorers themselves need a kernel to be seen.

Each explorer returns its VBox with `.figure` (the `go.FigureWidget`), `.controls` (name -> widget) and
`.update` (the redraw callback) attached, so tests and notebooks can drive it without a browser.
"""
from __future__ import annotations

import json

import plotly.graph_objects as go
import plotly.io as pio

from workbench.viz.advantage_comparisons import advantage_bars
from workbench.viz.clip_curves import surrogate_curves
from workbench.viz.run_curves import metric_series, training_curves
from workbench.viz.style import PLOTLY_MIME


def refresh(widget: go.FigureWidget, fig: go.Figure) -> None:
    """Copy `fig`'s traces and layout into `widget` in place (same trace count and types), as one message."""
    with widget.batch_update():
        for old, new in zip(widget.data, fig.data):
            old.update(new.to_plotly_json(), overwrite=True)
        # Shapes and annotations are replaced, not merged: a band or dual-clip line may have gone away.
        widget.layout.shapes = fig.layout.shapes
        widget.layout.annotations = fig.layout.annotations
        widget.layout.title = fig.layout.title
        for name in fig.layout.to_plotly_json():  # axes too: ticks and ranges may follow the data (log ticks)
            if name.startswith(("xaxis", "yaxis")):
                widget.layout[name] = fig.layout[name]


def slider(value: float, lo: float, hi: float, step: float, description: str):
    """A FloatSlider that redraws when released, its description at full width."""
    import ipywidgets as W

    return W.FloatSlider(value=value, min=lo, max=hi, step=step, description=description, continuous_update=False,
                         style={"description_width": "initial"})


def explorer(controls: dict, make, columns=None):
    """The controls over a FigureWidget of make(**{name: control.value}), redrawn in place on every change; the
    controls in one row, or in `columns` (lists of control names, side by side). With `.figure`, `.controls` and
    `.update` attached."""
    import ipywidgets as W

    def current() -> go.Figure:
        return make(**{name: c.value for name, c in controls.items()})

    figure = go.FigureWidget(current())

    def update(change=None):
        refresh(figure, current())

    for control in controls.values():
        control.observe(update, names="value")
    layout = (W.HBox([W.VBox([controls[name] for name in names]) for names in columns]) if columns
              else W.HBox(list(controls.values())))
    box = W.VBox([layout, figure])
    box.figure, box.controls, box.update = figure, controls, update
    return box


class LiveCurves:
    """Training curves that grow while a run trains: pass `add` as the trainer's callback, display `figure`; `add`
    the rows a resumed run already logged first (a finished run then still shows its curves).

    The figure is laid out up front (one subplot and one trace per key, from a placeholder row), so the first
    rows have traces to land in; each row then resets every trace to the series logged so far.

    `show()` displays it and `finish()` replaces it, once the run is over, by a static copy of the finished curves:
    a notebook keeps a widget as it was first displayed (the updates while a cell runs are not saved), so a saved or
    headless-run notebook, and the book built from it, would otherwise show empty panels.
    """

    def __init__(self, keys=("reward/mean", "entropy", "kl")):
        self.keys, self.rows, self.handle = list(keys), [], None
        self.figure = go.FigureWidget(training_curves([{"step": 0, **dict.fromkeys(self.keys, 0.0)}], keys=self.keys))
        with self.figure.batch_update():
            for trace in self.figure.data:
                trace.x, trace.y = [], []

    def add(self, row: dict) -> None:
        """Draw `row`; a step logged again (recomputed after a resume) replaces the one drawn before."""
        self.rows = [r for r in self.rows if r["step"] < row["step"]] + [row]
        with self.figure.batch_update():
            for trace, key in zip(self.figure.data, self.keys):
                trace.x, trace.y = metric_series(self.rows, key)

    def show(self) -> None:
        """Display the figure (in a notebook), to be replaced by `finish()`."""
        from IPython.display import display

        self.handle = display(self.figure, display_id=True)

    def finish(self) -> None:
        """Replace the displayed widget by a static figure of the curves drawn so far."""
        if self.handle is not None:  # plotly's mime bundle, raw: a Figure object would display itself anew instead
            figure = json.loads(pio.to_json(go.Figure(self.figure)))
            self.handle.update({PLOTLY_MIME: figure, "text/plain": "training curves"}, raw=True)


def advantage_explorer(rewards=(1, 0, 0, 1, 0, 0, 0, 1)):
    """One group of rewards, one slider each, and the GRPO / RLOO advantages they produce.

    Checkboxes: "divide by std" (GRPO scale="group", off = Dr.GRPO's scale="none") and "Bessel"
    (unbiased std). Returns an ipywidgets.VBox.
    """
    import ipywidgets as W

    sliders = [W.FloatSlider(value=float(r), min=-1.0, max=2.0, step=0.05, description=f"R{i}",
                             continuous_update=False, layout=W.Layout(width="300px"))
               for i, r in enumerate(rewards)]
    divide = W.Checkbox(value=True, description="divide by std")
    bessel = W.Checkbox(value=True, description="Bessel")
    figure = go.FigureWidget(advantage_bars([s.value for s in sliders]))

    def update(change=None):
        kw = {"scale": "group" if divide.value else "none", "unbiased": bessel.value}
        refresh(figure, advantage_bars([s.value for s in sliders], **kw))
        bessel.disabled = not divide.value  # the std is not used when scale="none"

    for control in (*sliders, divide, bessel):
        control.observe(update, names="value")
    update()
    controls = W.HBox([W.VBox(sliders[0::2]), W.VBox(sliders[1::2]), W.VBox([divide, bessel])])
    box = W.VBox([controls, figure])
    box.figure, box.update = figure, update
    box.controls = {**{s.description: s for s in sliders}, "divide": divide, "bessel": bessel}
    return box


SIGNS = {"both": (1, -1), "A > 0": (1,), "A < 0": (-1,)}


def clipping_explorer(objective: str = "ppo-clip", advantage: float = 1.0):
    """PPO clipping: sliders for eps_low, eps_high and the dual-clip cap c ("off" = no cap), and a toggle
    for the advantage sign, redrawing `surrogate_curves`. Returns an ipywidgets.VBox.
    """
    import ipywidgets as W

    eps_low = W.FloatSlider(value=0.2, min=0.0, max=0.5, step=0.01, description="ε_low", continuous_update=False)
    eps_high = W.FloatSlider(value=0.2, min=0.0, max=0.5, step=0.01, description="ε_high",
                             continuous_update=False)
    # c must be > 1 (ppo_clip raises otherwise), so the slider offers "off" and valid caps only.
    dual_c = W.SelectionSlider(options=[("off", 0.0), ("1.5", 1.5), ("2", 2.0), ("2.5", 2.5), ("3", 3.0),
                                        ("4", 4.0)], value=0.0, description="dual-clip c", continuous_update=False)
    sign = W.ToggleButtons(options=list(SIGNS), value="both", description="advantage")

    def current() -> go.Figure:
        return surrogate_curves(objective, advantage, signs=SIGNS[sign.value], eps_low=eps_low.value,
                                eps_high=eps_high.value, dual_clip_c=dual_c.value or None)

    figure = go.FigureWidget(current())

    def update(change=None):
        refresh(figure, current())

    for control in (eps_low, eps_high, dual_c, sign):
        control.observe(update, names="value")
    box = W.VBox([W.HBox([W.VBox([eps_low, eps_high]), W.VBox([dual_c, sign])]), figure])
    box.figure, box.update = figure, update
    box.controls = {"eps_low": eps_low, "eps_high": eps_high, "dual_clip_c": dual_c, "sign": sign}
    return box
