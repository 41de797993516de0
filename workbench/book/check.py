"""Read the built book as a learner would, in headless Chromium, and list what they would trip over.

    python -m workbench.book check [--html book/_build/html] [--width 1400]

Every page is opened over the DevTools protocol at a desktop window width, with overlay scrollbars (as on macOS and
phones: drawn only while scrolling, unless the page styles them), after MathJax has typeset and plotly has drawn, and
`check.js` measures it. The checks (CHECKS) are what a reader sees, not what the source says:

- a figure with no trace holding data, or one plotly did not draw;
- text boxes of a figure (title, axis titles, a tick-label row, subplot titles and other annotations, legend, colour
  bar) that overlap each other (titles: closer than 4 px), are drawn over a subplot's plot area (axis titles, tick
  labels, colour bars), or run past the figure's edge;
- a table or display equation wider than the box that holds it with no scrollbar in sight (cut, spilling out of the
  column, scrolling only at the bottom of a block taller than the window, or with no scrollbar drawn), and text cut
  at the edge of a box that hides overflow;
- TeX shown raw (``\\pi``, ``\\_``) outside the notebooks' source code, or in typeset math (a backslash, a MathJax
  error);
- an error or traceback in a cell's output, unless the cell is tagged ``expected-error`` (a notebook that shows an
  error on purpose says so);
- a row of a claims table (any table with a "verdict" column) whose verdict is not one of the four the claims page
  allows, or "not testable here" without its reason.

`check_figures` runs the checks on plotly figures alone; `screenshot` saves what a learner sees of a page or figure.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

CHECKS = {
    "figure-not-drawn": "a plotly figure that did not draw",
    "empty-figure": "a figure whose traces hold no data",
    "text-overlap": "two text boxes of a figure overlap, or one is drawn over a plot area",
    "text-past-edge": "a text box runs past its figure's edge",
    "too-wide": "a table or display equation wider than its box with no scrollbar in sight, or text cut by a box",
    "raw-tex": "TeX shown as text instead of typeset, or a backslash or error in typeset math",
    "error-output": "an error or traceback in a cell's output not tagged expected-error",
    "claim-without-verdict": "a claims row without a verdict, or not testable without a reason",
}
WIDTH, HEIGHT = 1400, 1000  # a laptop window; the book's text column is then about 780 px
CHECK_JS = Path(__file__).with_name("check.js")


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def wait_for(predicate, timeout: float, what: str, every: float = 0.2):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise TimeoutError(f"timed out after {timeout} s waiting for {what}")


class Page:
    """One browser tab over the DevTools protocol (websocket-client ships with jupyter_server)."""

    def __init__(self, ws_url: str):
        import websocket

        self.ws, self.next_id = websocket.create_connection(ws_url, timeout=120, suppress_origin=True), 0

    def call(self, method: str, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]

    def js(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}...: {result['exceptionDetails']}")
        return result["result"].get("value")

    def close(self):
        self.ws.close()


@contextmanager
def chromium(url: str = "about:blank", width: int = WIDTH, height: int = HEIGHT, profile: Path | None = None):
    """Headless Chromium showing `url`, yielding its Page; the browser is closed on exit."""
    exe = chromium_path()
    if exe is None:
        raise RuntimeError("no chromium: install it (apt-get install chromium; `make install` does it where apt works)")
    # chromium's helper processes may still write to the profile while it closes: leftovers are not an error
    with tempfile.TemporaryDirectory(prefix="workbench-chromium-", ignore_cleanup_errors=True) as tmp:
        profile = Path(profile or tmp)
        browser = subprocess.Popen(
            [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--enable-features=OverlayScrollbar",
             "--remote-debugging-port=0",
             f"--user-data-dir={profile}", f"--window-size={width},{height}", url],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        page = None
        try:
            port_file = profile / "DevToolsActivePort"
            port = wait_for(lambda: port_file.exists() and port_file.read_text().split("\n")[0], 60, "chromium").strip()
            targets = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10).read())
            page = Page(next(t for t in targets if t["type"] == "page")["webSocketDebuggerUrl"])
            yield page
        finally:
            if page is not None:
                page.close()
            browser.terminate()
            browser.wait(timeout=30)


DRAWN = "[...document.querySelectorAll('.plotly-graph-div')].every(gd => gd._fullLayout)"
TYPESET = ("(async () => { if (window.MathJax && MathJax.startup && MathJax.startup.promise) "
           "await MathJax.startup.promise; await document.fonts.ready; "
           "await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r))); return true; })()")


def check_page(page: Page, path: Path, draw_timeout: float = 60) -> list[dict]:
    """The defects of one HTML file, each {"page", "check", "where", "detail"}. A figure still not drawn after
    `draw_timeout` seconds is one of them."""
    page.call("Page.navigate", url=Path(path).resolve().as_uri())
    time.sleep(0.2)  # let the navigation replace the previous document before asking it whether it is complete
    wait_for(lambda: page.js("document.readyState === 'complete'"), 60, f"{path.name} to load")
    try:
        wait_for(lambda: page.js(DRAWN), draw_timeout, f"{path.name} to draw its figures")
    except TimeoutError:
        pass  # reported by the checks as figure-not-drawn
    page.js(TYPESET)
    found = page.js(f"({CHECK_JS.read_text(encoding='utf-8')})()")
    return [{"page": path.name, **d} for d in found]


def book_pages(html: Path) -> list[Path]:
    """The book's reading pages: intro, the notebooks in order, then the reference pages."""
    html = Path(html)
    named = [html / n for n in ("intro.html", "finder.html", "claims.html", "catalog.html")]
    return [named[0], *sorted((html / "notebooks").glob("*.html")), *[p for p in named[1:] if p.is_file()]]


def check_book(html: Path, width: int = WIDTH, pages: list[Path] | None = None, log=None,
               draw_timeout: float = 60) -> list[dict]:
    """Every page's defects."""
    found = []
    with chromium(width=width) as page:
        for path in pages or book_pages(html):
            defects = check_page(page, path, draw_timeout)
            if log:
                log(f"{path.name}: {len(defects)} defect(s)")
            found += defects
    return found


def report(defects: list[dict]) -> str:
    """One line a defect, grouped by page."""
    lines, last = [], None
    for d in defects:
        if d["page"] != last:
            lines.append(f"{d['page']}:")
            last = d["page"]
        lines.append(f"  {d['check']}: {d['where']}: {d['detail']}")
    return "\n".join(lines)


def screenshot(path: Path, out: Path, figure: int | None = None, width: int = WIDTH, full_page: bool = False) -> Path:
    """A PNG of a built page as a learner sees it: the window's top, the whole page (`full_page`), or plotly figure
    number `figure` (1-based, in page order) with a margin around it."""
    import base64

    with chromium(width=width) as page:
        check_page(page, Path(path))  # loads, waits for MathJax and plotly
        params = {"format": "png", "captureBeyondViewport": full_page}
        count = page.js("document.querySelectorAll('.plotly-graph-div').length")
        if figure is not None and not 1 <= figure <= count:
            raise ValueError(f"figure={figure}: {Path(path).name} has {count} figure(s), numbered from 1")
        if figure is not None:  # scrolled to the top of the window, so the page keeps its layout
            box = page.js(f"(async () => {{ const gd = document.querySelectorAll('.plotly-graph-div')[{figure - 1}]; "
                          "gd.scrollIntoView({block: 'start'}); await new Promise(r => requestAnimationFrame(r)); "
                          "const r = gd.getBoundingClientRect(); "
                          "return [r.left + scrollX, r.top + scrollY, r.width, Math.min(r.height, innerHeight)]; })()")
            params["clip"] = {"x": max(box[0] - 8, 0), "y": max(box[1] - 8, 0), "width": box[2] + 16,
                              "height": box[3] + 16, "scale": 1}
        elif full_page:
            size = page.js("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
            params["clip"] = {"x": 0, "y": 0, "width": size[0], "height": size[1], "scale": 1}
        data = page.call("Page.captureScreenshot", **params)["data"]
    Path(out).write_bytes(base64.b64decode(data))
    return Path(out)


COLUMN = 784  # px: the book's text column in a WIDTH-wide window


def check_figures(figures, folder: Path | None = None) -> list[dict]:
    """The checks on plotly figures alone, drawn as the book draws them (full column width, 525 px tall unless the
    figure sets a height), without building the book: for working on one figure."""
    import plotly.io as pio
    from plotly.offline import get_plotlyjs

    with tempfile.TemporaryDirectory(prefix="workbench-figures-") as tmp:
        folder = Path(folder or tmp)
        (folder / "plotly.min.js").write_text(get_plotlyjs(), encoding="utf-8")
        body = "".join(pio.to_html(fig, include_plotlyjs="plotly.min.js" if i == 0 else False, full_html=False,
                                   default_width="100%", default_height=525) for i, fig in enumerate(figures))
        page = folder / "figures.html"
        page.write_text(f'<html><head><meta charset="utf-8"></head><body><article style="width: {COLUMN}px">{body}'
                        '</article></body></html>',
                        encoding="utf-8")
        return check_book(folder, pages=[page])
