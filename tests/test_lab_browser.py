"""Notebook 01 live in JupyterLab, driven in headless chromium over the DevTools protocol: every cell runs, the
live training curves draw, and moving the advantage explorer's first slider redraws its figure."""
import os
import socket
import subprocess
import sys
import urllib.request

import pytest

from workbench.book.check import chromium, chromium_path, wait_for
from workbench.paths import ROOT

CHROMIUM = chromium_path()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium: `apt-get install chromium` (make install does it where apt is available)")]
TOKEN = "workbench-test"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def lab(tmp_path):
    """A JupyterLab server on notebook 01 (40 training steps cut to 6), with the app object exposed to scripts."""
    import jupytext

    nb = jupytext.read(ROOT / "notebooks" / "01_grpo.py")
    for cell in nb.cells:
        if "parameters" in cell.metadata.get("tags", []):
            cell.source = cell.source.replace("steps = None", "steps = 6")
    jupytext.write(nb, tmp_path / "01_grpo.ipynb")
    port = free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    server = subprocess.Popen([sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root",
                               f"--port={port}", f"--IdentityProvider.token={TOKEN}",
                               "--LabApp.expose_app_in_browser=True", f"--ServerApp.root_dir={tmp_path}"],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"

    def up():
        try:
            return urllib.request.urlopen(f"{base}/api/status?token={TOKEN}", timeout=2).status == 200
        except OSError:
            return False

    try:
        wait_for(up, 120, "the JupyterLab server")
        yield f"{base}/lab/tree/01_grpo.ipynb?token={TOKEN}", tmp_path
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_notebook_01_runs_in_jupyterlab_and_a_slider_redraws_its_figure(lab, tmp_path):
    url, root = lab
    with chromium(url, profile=tmp_path / "profile") as page:
        wait_for(lambda: page.js("!!(window.jupyterapp && jupyterapp.shell.currentWidget && "
                                 "jupyterapp.shell.currentWidget.sessionContext)"), 120, "the notebook to open")
        page.js("(async () => { const nb = jupyterapp.shell.currentWidget; await nb.sessionContext.ready; "
                "await jupyterapp.commands.execute('notebook:run-all-cells'); })()")
        done = ("(() => { const nb = jupyterapp.shell.currentWidget; const cells = nb.content.widgets"
                ".filter(c => c.model.type === 'code'); return nb.sessionContext.session.kernel.status === 'idle' "
                "&& cells.every(c => c.model.executionCount !== null); })()")
        wait_for(lambda: page.js(done), 900, "every cell to run")
        errors = page.js("[...document.querySelectorAll('.jp-OutputArea-output[data-mime-type="
                         "\"application/vnd.jupyter.stderr\"]')].map(e => e.innerText).filter(t => /Error|Traceback/"
                         ".test(t))")
        assert not errors, errors
        assert (root / "runs").is_dir()  # the run folder the notebook trained into
        # the live curves drew the 6 steps; the advantage explorer is the first figure with sliders before it
        plots = "[...document.querySelectorAll('.js-plotly-plot')]"
        assert page.js(f"{plots}.some(p => (p.data || []).some(t => (t.x || []).length === 6))"), "live curves empty"
        first_bars = "JSON.stringify(document.querySelector('.widget-vbox .js-plotly-plot').data.map(t => t.y))"
        before = page.js(first_bars)
        handle = page.js("(() => { const h = document.querySelector('.widget-vbox .widget-slider .noUi-handle'); "
                         "h.scrollIntoView(); h.focus(); return document.activeElement === h; })()")
        assert handle, "no slider handle to focus"
        value = "document.querySelector('.widget-vbox .widget-slider .widget-readout').innerText"
        start = page.js(value)
        for _ in range(4):  # the keyboard moves a noUiSlider handle by one step per press
            page.call("Input.dispatchKeyEvent", type="keyDown", key="ArrowRight", code="ArrowRight",
                      windowsVirtualKeyCode=39)
            page.call("Input.dispatchKeyEvent", type="keyUp", key="ArrowRight", code="ArrowRight",
                      windowsVirtualKeyCode=39)
        wait_for(lambda: page.js(first_bars) != before, 60, "the figure to redraw after the slider moved")
        assert float(page.js(value)) == pytest.approx(float(start) + 4 * 0.05)  # R0 moved by 4 steps of 0.05
