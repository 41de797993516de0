"""The book's copy of an executed notebook made static: nothing on a page needs a kernel or an outside host.

- plotly figures (`application/vnd.plotly.v1+json`, which Sphinx cannot show) become static HTML that loads
  plotly.js from the book;
- every widget output (an explorer: sliders around a `go.FigureWidget`) becomes the figure at the setting the
  notebook left it in (its default), the controls and their values in words, and a line saying that moving them
  needs a kernel; the notebook's widget state (which embeds plotly's 5 MB bundle once per figure and makes
  myst-nb load require.js and the widget manager from a CDN) is dropped;
- papermill's injected-parameters cell is removed from the page (the notebook's own parameters cell stays).
"""
from __future__ import annotations

import base64
import copy
import html
import re
from pathlib import Path

from workbench.viz.style import PLOTLY_MIME

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
MODEL_REF = re.compile(r"IPY_MODEL_(\w+)")
LIVE_NOTE = ("Static picture at the notebook's default setting{controls}. Moving the controls needs a running "
             "kernel: open this notebook in JupyterLab (<code>make lab</code>).")
LIVE_FIGURE_NOTE = ("Static picture of the figure as the notebook's run left it; in a running kernel it fills in while "
                    "the cell runs (<code>make lab</code>).")


def figure_html(fig: dict, first: bool, plotly_src: str) -> str:
    """A figure dict ({"data", "layout"}) as HTML; the page's first figure loads plotly.js from the book."""
    import plotly.io as pio

    return pio.to_html(fig, config=fig.pop("config", None) or {}, include_plotlyjs=plotly_src if first else False,
                       include_mathjax=False, full_html=False, default_width="100%", default_height=525,
                       validate=False)


def descendants(model_id: str, models: dict) -> list[str]:
    """model_id and every model it refers to (children, figures), depth first, each once."""
    seen, stack = [], [model_id]
    while stack:
        current = stack.pop(0)
        if current in seen or current not in models:
            continue
        seen.append(current)
        stack[:0] = MODEL_REF.findall(str(models[current].get("state", {})))
    return seen


def decoded(value):
    """plotly's binary arrays ({"dtype", "shape", "buffer": base64}) as nested lists, anywhere inside `value`."""
    if isinstance(value, dict):
        if {"dtype", "shape", "buffer"} <= set(value):
            import numpy as np

            array = np.frombuffer(base64.b64decode(value["buffer"]), dtype=value["dtype"])
            return array.reshape(value["shape"]).tolist()
        return {k: decoded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decoded(v) for v in value]
    return value


def with_buffers(model: dict) -> dict:
    """A widget model's state with its binary buffers (stored beside it, by path) put back where they belong."""
    state = copy.deepcopy(model.get("state", {}))
    for buffer in model.get("buffers", []):
        *path, last = buffer["path"]
        target = state
        for key in path:
            target = target[key]
        target[last] = buffer["data"]  # base64 text, decoded with its dtype by `decoded`
    return decoded(state)


def widget_parts(model_id: str, models: dict) -> tuple[list[dict], list[str]]:
    """The figures ({"data", "layout"}) and the controls ("description = value") under a widget."""
    figures, controls = [], []
    for mid in descendants(model_id, models):
        state = models[mid].get("state", {})
        if "_widget_data" in state and "_widget_layout" in state:  # plotly's FigureWidget (an anywidget)
            state = with_buffers(models[mid])
            figures.append({"data": state["_widget_data"], "layout": state["_widget_layout"]})
        elif state.get("description") and control_value(state) is not None:
            controls.append(f"{state['description']} = {control_value(state)}")
    return figures, controls


def control_value(state: dict):
    """A control's setting: its `value`, or for a selection widget (Dropdown, ToggleButtons: they store `index`)
    the label of the selected option; None for anything else."""
    if "value" in state and not isinstance(state["value"], (dict, list)):
        return state["value"]
    labels, index = state.get("_options_labels"), state.get("index")
    if isinstance(labels, list) and isinstance(index, int) and 0 <= index < len(labels):
        return labels[index]
    return None


def live_note(controls: list[str]) -> str:
    """What the stand-in says: the controls it was drawn at, or (no controls: a figure a running cell fills in) that."""
    text = (LIVE_NOTE.format(controls=f" (controls: {html.escape(', '.join(controls))})") if controls
            else LIVE_FIGURE_NOTE)
    return f'<p class="workbench-live-note"><em>{text}</em></p>'


def make_static(nb, plotly_src: str) -> dict:
    """Rewrite `nb` (nbformat) in place as the module docstring says; returns counts of what changed."""
    models = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    counts = {"figures": 0, "widgets": 0, "parameter_cells": 0}
    for cell in nb.cells:
        if "injected-parameters" in cell.get("metadata", {}).get("tags", []):
            cell.metadata.tags = [*cell.metadata.tags, "remove-cell"]
            counts["parameter_cells"] += 1
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if PLOTLY_MIME in data:
                data["text/html"] = figure_html(dict(data.pop(PLOTLY_MIME)), not counts["figures"], plotly_src)
                counts["figures"] += 1
            elif WIDGET_VIEW in data:
                figures, controls = widget_parts(data.pop(WIDGET_VIEW)["model_id"], models)
                data.pop("text/plain", None)  # "VBox(children=...)" says nothing to a reader
                if not figures and not controls:  # a progress bar: nothing to show once the cell has run
                    continue
                parts = [figure_html(f, not counts["figures"] and not i, plotly_src) for i, f in enumerate(figures)]
                counts["figures"] += len(figures)
                data["text/html"] = "\n".join(parts + [live_note(controls)])
                counts["widgets"] += 1
        if "outputs" in cell:  # drop the outputs emptied above (progress bars)
            cell.outputs = [o for o in cell.outputs if "data" not in o or o["data"]]
    nb.metadata.pop("widgets", None)
    return counts


def static_notebook(ipynb: Path, plotly_src: str) -> dict:
    """`make_static` on a notebook file, written back when anything changed."""
    import nbformat

    nb = nbformat.read(ipynb, as_version=4)
    had_state = "widgets" in nb.metadata
    counts = make_static(nb, plotly_src)
    if any(counts.values()) or had_state:
        nbformat.write(nb, ipynb)
    return counts
