"""A Sphinx extension for the book: every page gets the book's stylesheet (book/workbench.css, copied next to MathJax
by workbench/book/build.py), and no page asks an outside host for anything.

sphinx-thebe (which Jupyter Book 1 always loads) adds its configuration script, with the thebe bundle's unpkg.com
URL, once per read of the environment, so pages carried it twice and browsers logged "THEBE_JS_URL has already been
declared". The book has no live-code button (explorers need JupyterLab), so its scripts and styles are dropped.
"""
from __future__ import annotations


def mentions_thebe(asset) -> bool:
    """A script or stylesheet entry of a page (a filename, or an inline body) that belongs to thebe."""
    text = f"{getattr(asset, 'filename', '') or ''} {getattr(asset, 'attributes', {}).get('body', '')} {asset}"
    return "thebe" in text.lower()


def drop_thebe(app, pagename, templatename, context, doctree) -> None:
    for key in ("script_files", "css_files"):
        if key in context:
            context[key] = [asset for asset in context[key] if not mentions_thebe(asset)]


STYLESHEET = "workbench.css"  # in html_static_path (book/_vendor)


def setup(app):
    app.add_css_file(STYLESHEET)
    app.connect("html-page-context", drop_thebe, priority=900)  # after the theme has added its assets
    return {"parallel_read_safe": True, "parallel_write_safe": True}
