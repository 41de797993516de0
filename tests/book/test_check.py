"""The built book in a real browser (Debian's chromium, headless): every page loads with no console error and
no request to another host, math is typeset by the book's MathJax, every plotly figure is drawn, and nothing a
learner would trip over is on any page (`workbench.book.check`: empty figures, colliding or clipped figure text,
content wider than the column with no scrollbar in sight, raw TeX, unintended errors in outputs, claims without a
verdict)."""
import json
import re
import subprocess
from pathlib import Path

import pytest

from workbench.book.check import CHECKS, book_pages, check_book, chromium_path, report
from workbench.paths import ROOT

CHROMIUM = chromium_path()
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
    for page in book_pages(html):
        source = page.read_text(encoding="utf-8")
        dom, console, outside = visit(page, tmp_path)
        assert not outside, (page.name, outside)
        assert not console, (page.name, console)
        if 'class="math' in source:
            assert "<mjx-container" in dom, f"{page.name}: math not typeset"
        figures = len(re.findall(r'class="plotly-graph-div"', source))
        assert dom.count('class="main-svg"') >= figures, f"{page.name}: {figures} figures, some not drawn"


# ------------------------------------------------------------------------------ what a learner trips over

def figure(fig, first: bool) -> str:
    import plotly.io as pio

    return pio.to_html(fig, include_plotlyjs="plotly.min.js" if first else False, full_html=False,
                       default_width="100%", default_height=420)


def page_with(tmp_path, name: str, body: str) -> Path:
    """An HTML page in the book's shape (an <article> column 780 px wide) beside a copy of plotly.js."""
    from plotly.offline import get_plotlyjs

    if not (tmp_path / "plotly.min.js").exists():
        (tmp_path / "plotly.min.js").write_text(get_plotlyjs())
    path = tmp_path / name
    path.write_text(f'<html><head><meta charset="utf-8"></head><body><article style="width: 780px">{body}</article>'
                    "</body></html>")
    return path


def bad_and_good_pages(tmp_path):
    """Two pages: every defect the checks know once, and the same content made right."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    crowded = make_subplots(rows=1, cols=3, subplot_titles=["a subplot title far too long for its third"] * 3)
    for col in (1, 2, 3):
        crowded.add_trace(go.Bar(x=[1, 2], y=[1, 2]), row=1, col=col)
    crowded.update_layout(xaxis_title="the x axis", legend=dict(orientation="h", y=-0.05), showlegend=True,
                          title=dict(text="a title " * 30))
    tidy = make_subplots(rows=1, cols=3, subplot_titles=["one", "two", "three"])
    for col in (1, 2, 3):
        tidy.add_trace(go.Bar(x=[1, 2], y=[1, 2]), row=1, col=col)
    tidy.update_layout(xaxis_title="step", legend=dict(orientation="h", y=-0.3), title="a short title",
                       margin=dict(b=120))
    wide = "<table><tr>" + "<td>cell</td>" * 150 + "</tr></table>"
    tall = "<table><tr>" + "<td>cell</td>" * 150 + "</tr>" + "<tr><td>row</td></tr>" * 80 + "</table>"
    equation = '<mjx-container jax="CHTML" display="true" style="display: block"><span style="display: ' \
               'inline-block; width: 1500px">x</span></mjx-container>'
    long_name = "<p><code>tests/rewards/test_a_reward.py::test_a_name_far_longer_than_its_box</code></p>"
    claims = ("<table><thead><tr><th>recipe</th><th>claim</th><th>verdict</th></tr></thead><tbody>{}</tbody>"
              "</table>")
    # overlay scrollbars (as on macOS) show only while scrolling: a plain scroller gives no sign of more to the right
    plain = "<style>.plain-scroller { overflow-x: auto }</style>"
    bad = page_with(tmp_path, "bad.html", "".join([plain,
        figure(go.Figure(go.Scatter(x=[], y=[])), True), figure(crowded, False), '<div class="plotly-graph-div"></div>',
        f'<div style="overflow-x: hidden">{wide}</div>', f'<div style="overflow-x: auto">{tall}</div>', equation,
        f'<div class="plain-scroller">{wide}</div>', f'<div style="overflow: hidden; width: 200px">{long_name}</div>',
        r"<p>a reference \pi_{ref} and sum\_then\_normalize</p>",
        '<div class="cell"><div class="cell_output"><pre>ValueError: this component needs batch fields</pre></div></div>',
        claims.format("<tr><td>x</td><td>c</td><td>not tested yet: no comparison</td></tr>"
                      "<tr><td>y</td><td>c</td><td>not testable here</td></tr>")]))
    book_css = f"<style>{(ROOT / 'book' / 'workbench.css').read_text()}</style>"  # draws the scrollbars
    good = page_with(tmp_path, "good.html", "".join([book_css,
        figure(go.Figure(go.Scatter(x=[1, 2], y=[3, 4])), True), figure(tidy, False),
        f'<div style="overflow-x: auto">{wide}</div>', f'<div style="overflow-x: auto; max-height: 60vh">{tall}</div>',
        f'<div style="overflow-x: auto">{equation}</div>', "<p>a reference π_ref and <code>sum_then_normalize</code></p>",
        f'<div style="overflow: hidden; width: 200px; overflow-wrap: anywhere">{long_name}</div>',
        '<div class="cell tag_expected-error"><div class="cell_output"><pre>ValueError: shown on purpose</pre>'
        "</div></div>",
        '<div class="cell"><div class="cell_input"><pre>r"\\pi"</pre></div></div>',
        claims.format("<tr><td>x</td><td>c</td><td>reproduced (no worse)</td></tr>"
                      "<tr><td>y</td><td>c</td><td>not testable here: the toy task has no tags to reward</td></tr>")]))
    return bad, good


def test_each_check_catches_its_defect_and_passes_the_same_content_made_right(tmp_path):
    bad, good = bad_and_good_pages(tmp_path)
    found = check_book(tmp_path, pages=[bad], draw_timeout=3)
    caught = {d["check"] for d in found}
    assert caught == set(CHECKS), report(found)
    details = report(found)
    for expected in ("empty-figure: figure 1", "annotation \"a subplot title far too long", "overlaps legend",
                     "runs", "cut with no way to scroll", "out of sight", "an equation (x)", "spilling out of it",
                     "no scrollbar is drawn", '"tests/rewards/test_a_reward.py::test_a_name_far_longer_than…": cut at',
                     r'shows "a reference \pi_{ref} and sum\_then', "ValueError: this component needs",
                     'verdict "not tested yet', 'verdict "not testable here"'):
        assert expected in details, (expected, details)
    assert check_book(tmp_path, pages=[good]) == [], report(check_book(tmp_path, pages=[good]))


def test_no_page_of_the_book_has_what_a_learner_trips_over(built_book):
    html, _ = built_book
    found = check_book(html)
    assert not found, f"{len(found)} defect(s) in the built book:\n{report(found)}"


def test_a_screenshot_of_a_figure_the_page_does_not_have_is_refused(tmp_path):
    from workbench.book.check import screenshot

    _, good = bad_and_good_pages(tmp_path)
    with pytest.raises(ValueError, match="figure=9: good.html has 2 figure"):
        screenshot(good, tmp_path / "x.png", figure=9)
