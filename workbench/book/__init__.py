"""The workbench book: executed notebooks plus catalog, method finder and claims pages generated from the code.

    python -m workbench.book build [--executed DIR] [--out DIR]
    python -m workbench.book check [--html DIR] [--width PX]   # what a learner would trip over (check.py)

Steps of a build (`build.py`), each printed as it runs:

1. every ``notebooks/*.py`` (percent-format Jupytext, the source of truth) is converted and executed
   headless with papermill at ``preset="smoke"`` into ``book/notebooks/<stem>.ipynb`` (`notebooks.py`); with
   ``--executed DIR`` the already-executed ``DIR/<stem>.ipynb`` are copied instead; each is then made static
   (`outputs.py`);
2. ``book/catalog.md`` (`catalog_page.py`) and the method finder ``book/finder.md`` (`finder.py`) are generated
   from the registry, the notebooks and the ``@pytest.mark.covers`` marks in ``tests/**/*.py`` (`covers.py`),
   ``book/claims.md`` (`claims_page.py`) from the stored runs (``workbench.results``); ``book/_toc.yml`` lists
   intro, every notebook (sorted by name), the finder, the claims and the catalog;
3. MathJax 3 is installed from npm into ``book/node_modules`` (once) and copied next to the book's
   static files, so that math renders offline;
4. ``jupyter-book build`` (1.x) runs with every Sphinx warning an error (`sphinx_ext.py` is its extension); the
   HTML lands in ``<out>/_build/html`` (``out`` defaults to ``book/``).

Generated files (``book/notebooks/``, ``book/catalog.md``, ``book/finder.md``, ``book/claims.md``,
``book/_toc.yml``, ``book/_vendor/``) are git-ignored: ``book/_config.yml``, ``book/intro.md``,
``book/workbench.css`` and ``book/package.json`` are the sources.

This file imports nothing, so a command that needs one part of the book (`workbench notebook` its notebook runner,
`workbench show` the `covers` marks) imports only that part and what it uses.
"""


class BookError(RuntimeError):
    """A build step failed; the message says which and how to reproduce it."""


def log(msg: str) -> None:
    print(f"[book] {msg}", flush=True)
