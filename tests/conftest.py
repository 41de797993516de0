"""Shared test set-up: one CPU thread, offline Hugging Face, the `covers` marker, and the notebooks
executed once per session (tests/test_notebooks.py checks them, tests/test_book.py builds the book
from them)."""
from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)


def pytest_configure(config):
    config.addinivalue_line("markers", "covers(*keys): catalog keys a test checks")


class NotebookRuns:
    """Executes notebooks/*.py at preset "smoke" on first request, once per session."""

    def __init__(self, out_dir):
        self.dir = out_dir
        self.errors: dict[str, Exception] = {}
        self.done: set[str] = set()

    def run(self, source):
        from workbench.book import execute_notebook

        if source.stem not in self.done:
            self.done.add(source.stem)
            try:
                # the headless run checks the exercises' solutions (notebooks that have a `solutions` parameter)
                params = {"solutions": True} if "solutions =" in source.read_text() else {}
                execute_notebook(source, self.dir / f"{source.stem}.ipynb", preset="smoke", parameters=params)
            except Exception as e:  # BookError names the notebook and the failing cell
                self.errors[source.stem] = e
        if source.stem in self.errors:
            error = self.errors[source.stem]
            raise AssertionError(f"notebook {source.name} failed: {error}") from error


@pytest.fixture(scope="session")
def notebook_runs(tmp_path_factory) -> NotebookRuns:
    return NotebookRuns(tmp_path_factory.mktemp("executed_notebooks"))


@pytest.fixture(scope="session")
def executed_notebooks(notebook_runs):
    """Folder holding <stem>.ipynb for every notebooks/*.py, all executed without error."""
    from workbench.book import notebook_sources

    for source in notebook_sources():
        notebook_runs.run(source)
    return notebook_runs.dir


@pytest.fixture(scope="session")
def built_book(executed_notebooks, tmp_path_factory):
    """(html folder, build log) of the book built once from the executed notebooks."""
    import subprocess
    import sys

    out = tmp_path_factory.mktemp("book")
    proc = subprocess.run([sys.executable, "-m", "workbench.book", "build", "--executed", str(executed_notebooks),
                           "--out", str(out)], capture_output=True, text=True)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-6000:]
    return out / "_build" / "html", log
