"""The book build: the table of contents and intro (fast) and a full Jupyter Book build from executed notebooks
(slow)."""
from __future__ import annotations

import re

import pytest

from workbench import registry
from workbench.book.build import toc_yaml
from workbench.book.notebooks import notebook_sources
from workbench.paths import ROOT


def test_the_intro_suggests_an_order_through_every_notebook():
    intro = (ROOT / "book" / "intro.md").read_text(encoding="utf-8")
    for source in notebook_sources():
        assert f"](notebooks/{source.stem}.ipynb)" in intro, f"book/intro.md does not list {source.stem}"


def test_toc_lists_notebooks_in_order():
    toc = toc_yaml(["01_grpo", "02_ppo"])
    assert toc.index("file: notebooks/01_grpo") < toc.index("file: notebooks/02_ppo") < toc.index("file: catalog")
    assert "root: intro" in toc and "Notebooks" not in toc_yaml([])


@pytest.mark.slow
def test_book_builds_without_warnings(built_book):
    html, log = built_book
    assert "build succeeded" in log and "WARNING" not in log, log[-6000:]
    catalog = (html / "catalog.html").read_text(encoding="utf-8")
    for entry in registry.entries():
        assert f'<span class="pre">{entry.key}</span></code><a class="headerlink"' in catalog, entry.key
    for key in registry.missing_keys():
        assert f'<span class="pre">{key}</span>' in catalog, key

    # math is typeset by the MathJax copy shipped in the book, not a CDN
    mathjax = html / "_static" / "mathjax" / "tex-chtml.js"
    assert mathjax.is_file() and (html / "_static" / "mathjax" / "output" / "chtml" / "fonts").is_dir()
    pages = [html / "intro.html", html / "catalog.html"]
    pages += [html / "notebooks" / f"{source.stem}.html" for source in notebook_sources()]
    assert all(page.is_file() for page in pages), pages
    for page in html.rglob("*.html"):  # Sphinx adds MathJax only to pages with math
        text = page.read_text(encoding="utf-8")
        prefix = "../" * (len(page.relative_to(html).parts) - 1)
        if 'class="math' in text or page.name == "catalog.html":
            assert f'src="{prefix}_static/mathjax/tex-chtml.js' in text, page
        assert "cdn.jsdelivr.net/npm/mathjax" not in text and "cdnjs.cloudflare.com/ajax/libs/mathjax" not in text
    for page in html.rglob("*.html"):  # offline, and light: no widget state, plotly.js served once from _static
        text = page.read_text(encoding="utf-8")
        assert page.stat().st_size < 3_000_000, (page, page.stat().st_size)
        assert not re.search(r'<script[^>]+src="https?://', text), page
        assert "require.min.js" not in text and "html-manager" not in text and "unpkg.com" not in text, page
