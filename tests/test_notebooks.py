"""Every notebook runs headless, top to bottom, at preset "smoke" (executed once per session by the
`notebook_runs` fixture in conftest.py, with the same function `make book` uses)."""
from __future__ import annotations

import pytest

from workbench.book.notebooks import notebook_sources

SOURCES = notebook_sources()


@pytest.mark.slow
@pytest.mark.parametrize("source", SOURCES, ids=[s.stem for s in SOURCES])
def test_notebook_runs(source, notebook_runs):
    notebook_runs.run(source)  # raises AssertionError naming the notebook and the failing cell
    assert (notebook_runs.dir / f"{source.stem}.ipynb").is_file()
