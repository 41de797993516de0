"""The built book in a real browser (Debian's chromium, headless): every page loads with no console error and
no request to another host, math is typeset by the book's MathJax, and every plotly figure is drawn."""
import json
import re
import shutil
import subprocess

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium: `apt-get install chromium` (make install does it where apt is available)")]
QUIET = ["--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
         "--disable-default-apps", "--disable-client-side-phishing-detection"]
BENIGN = ("Got invalid theme mode", "[PST]", "[togglebutton]")  # the theme's own info messages


def visit(page, tmp_path):
    """(DOM after scripts ran, console messages, URLs the page requested from other hosts)."""
    netlog = tmp_path / f"{page.stem}.netlog.json"
    proc = subprocess.run(
        [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'profile'}",
         *QUIET, "--enable-logging=stderr", "--v=0", f"--log-net-log={netlog}", "--virtual-time-budget=15000",
         "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line and not any(b in line for b in BENIGN)]
    events = json.loads(netlog.read_text()).get("events", []) if netlog.exists() else []
    outside = {e["params"]["url"] for e in events  # the page's own requests (the browser's are keyed otherwise)
               if str(e.get("params", {}).get("network_isolation_key", "")).startswith("file://")
               and not e["params"].get("url", "file:").startswith("file:")}
    return proc.stdout, console, outside


def test_a_page_that_breaks_the_rules_is_caught(tmp_path):
    bad = tmp_path / "bad.html"
    bad.write_text('<html><body><script src="https://cdn.example.org/x.js"></script>'
                   "<script>undefinedFunction()</script></body></html>")
    _, console, outside = visit(bad, tmp_path)
    assert outside == {"https://cdn.example.org/x.js"} and any("Uncaught ReferenceError" in c for c in console)


def test_every_page_loads_offline_without_errors_with_math_and_figures(built_book, tmp_path):
    html, _ = built_book
    pages = [html / "intro.html", html / "catalog.html", html / "finder.html", html / "claims.html",
             *sorted((html / "notebooks").glob("*.html"))]
    for page in pages:
        source = page.read_text(encoding="utf-8")
        dom, console, outside = visit(page, tmp_path)
        assert not outside, (page.name, outside)
        assert not console, (page.name, console)
        if 'class="math' in source:
            assert "<mjx-container" in dom, f"{page.name}: math not typeset"
        figures = len(re.findall(r'class="plotly-graph-div"', source))
        assert dom.count('class="main-svg"') >= figures, f"{page.name}: {figures} figures, some not drawn"
