"""The book's copy of a notebook: figures as static HTML, explorers as static stand-ins, no widget state."""
import base64
import json

import nbformat
import numpy as np

from workbench.book.outputs import PLOTLY_MIME, WIDGET_STATE, WIDGET_VIEW, make_static, static_notebook

SRC = "../_static/plotly.min.js"


def figure_output():
    fig = {"data": [{"type": "scatter", "x": [1, 2], "y": [3, 4]}], "layout": {}, "config": {}}
    return nbformat.v4.new_output("display_data", data={PLOTLY_MIME: fig, "text/plain": "Figure"})


def test_plotly_outputs_become_static_html_loading_plotly_once(tmp_path):
    cell = nbformat.v4.new_code_cell("fig", outputs=[figure_output(), figure_output()])
    path = tmp_path / "nb.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), path)
    assert static_notebook(path, SRC)["figures"] == 2
    first, second = (o["data"] for o in nbformat.read(path, as_version=4).cells[0].outputs)
    assert PLOTLY_MIME not in first and "Plotly.newPlot" in first["text/html"]
    assert f'src="{SRC}"' in first["text/html"]  # plotly.js once per page
    assert "plotly.min.js" not in second["text/html"] and "mathjax" not in second["text/html"].lower()


def explorer_notebook():
    """An executed explorer as Jupyter stores it: a VBox of a slider and a plotly FigureWidget (an anywidget whose
    state embeds plotly's bundle in `_esm`), plus papermill's injected parameters."""
    state = {
        "box": {"model_name": "VBoxModel", "state": {"children": ["IPY_MODEL_slider", "IPY_MODEL_pick",
                                                                   "IPY_MODEL_fig"]}},
        "slider": {"model_name": "IntSliderModel", "state": {"description": "G", "value": 8, "layout": "IPY_MODEL_l"}},
        "pick": {"model_name": "DropdownModel", "state": {"description": "objective", "index": 1,  # stores no value
                                                          "_options_labels": ["ppo-clip", "gspo"]}},
        "l": {"model_name": "LayoutModel", "state": {}},
        "fig": {"model_name": "AnyModel", "state": {"_esm": "x" * 100_000, "_widget_layout": {"title": {"text": "A"}},
                                                    "_widget_data": [{"type": "bar", "x": [0, 1], "uid": "u1",
                                                                      "y": {"dtype": "float64", "shape": [2]}}]},
                "buffers": [{"path": ["_widget_data", 0, "y", "buffer"], "encoding": "base64",  # y = [0.5, -0.5]
                             "data": base64.b64encode(np.array([0.5, -0.5]).tobytes()).decode()}]},
    }
    view = nbformat.v4.new_output("display_data", data={WIDGET_VIEW: {"model_id": "box", "version_major": 2},
                                                        "text/plain": "VBox(children=(IntSlider(...)))"})
    injected = nbformat.v4.new_code_cell("preset = 'smoke'")
    injected.metadata["tags"] = ["injected-parameters"]
    nb = nbformat.v4.new_notebook(cells=[injected, nbformat.v4.new_code_cell("explorer()", outputs=[view])])
    nb.metadata["widgets"] = {WIDGET_STATE: {"state": state, "version_major": 2}}
    return nb


def test_an_explorer_becomes_its_default_figure_its_controls_and_a_kernel_note():
    nb = explorer_notebook()
    counts = make_static(nb, SRC)
    assert counts == {"figures": 1, "widgets": 1, "parameter_cells": 1}
    data = nb.cells[1].outputs[0]["data"]
    assert set(data) == {"text/html"}
    page = data["text/html"]
    assert "Plotly.newPlot" in page and "[0.5,-0.5]" in page.replace(" ", "")  # the figure's default data
    assert f'src="{SRC}"' in page and "controls: G = 8, objective = gspo" in page and "needs a running kernel" in page
    assert "widgets" not in nb.metadata and "x" * 1000 not in json.dumps(nb)  # no bundle left on the page
    assert "remove-cell" in nb.cells[0].metadata["tags"]


def test_a_progress_bar_is_dropped_and_a_figure_without_controls_says_it_fills_in_live():
    state = {"bar": {"model_name": "HBoxModel", "state": {"children": ["IPY_MODEL_p"]}},
             "p": {"model_name": "FloatProgressModel", "state": {"description": "", "value": 40}},
             "fig": {"model_name": "AnyModel", "state": {"_widget_layout": {}, "_widget_data": [{"type": "scatter",
                                                                                                 "x": [0], "y": [1]}]}}}
    views = [nbformat.v4.new_output("display_data", data={WIDGET_VIEW: {"model_id": m}, "text/plain": "x"})
             for m in ("bar", "fig")]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("train()", outputs=views)])
    nb.metadata["widgets"] = {WIDGET_STATE: {"state": state}}
    make_static(nb, SRC)
    (output,) = nb.cells[0].outputs  # the progress bar is gone
    page = output["data"]["text/html"]
    assert "fills in while the cell runs" in page and "controls" not in page
