"""Shared test set-up: one CPU thread, offline Hugging Face, the `covers` marker, and the notebooks
executed once per session (tests/test_notebooks.py checks them, tests/book/test_build.py builds the book
from them)."""
from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)


def pytest_addoption(parser):
    parser.addoption("--device", default="cpu",
                     help="device of every smoke-preset config the tests make (cpu; cuda on a GPU machine: "
                          "`python bench/gpu_check.py --part recipes` runs the recipe tests there)")


def pytest_configure(config):
    config.addinivalue_line("markers", "covers(*keys): catalog keys a test checks")
    device = config.getoption("--device")
    if device != "cpu":  # the smoke preset on another device, with its deterministic kernels where torch has them
        from workbench.train.config import PRESETS

        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True, warn_only=True)
        PRESETS["smoke"]["device"] = device


def shared_dir(tmp_path_factory, name: str):
    """A folder every pytest-xdist worker of this session shares (`make test` runs -n 2): the session's base temp,
    whose parent holds each worker's own base temp; without xdist, the base temp."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name
    folder.mkdir(exist_ok=True)
    return folder


class NotebookRuns:
    """Executes notebooks/*.py at preset "smoke" on first request, once per session: the first worker to ask for a
    notebook runs it under a file lock, the others wait for it and read its outcome (<stem>.ok or <stem>.error)."""

    def __init__(self, out_dir):
        self.dir = out_dir

    def run(self, source):
        from filelock import FileLock

        from workbench.book.notebooks import execute_notebook

        ok, failed = self.dir / f"{source.stem}.ok", self.dir / f"{source.stem}.error"
        with FileLock(self.dir / f"{source.stem}.lock"):
            if not ok.exists() and not failed.exists():
                try:
                    # the headless run checks the exercises' solutions (notebooks that have a `solutions` parameter)
                    params = {"solutions": True} if "solutions =" in source.read_text() else {}
                    execute_notebook(source, self.dir / f"{source.stem}.ipynb", preset="smoke", parameters=params)
                    ok.touch()
                except Exception as e:  # BookError names the notebook and the failing cell
                    failed.write_text(f"{type(e).__name__}: {e}")
        if failed.exists():
            raise AssertionError(f"notebook {source.name} failed: {failed.read_text()}")


@pytest.fixture
def math_verify():
    """math-verify for the tests that need it (the math verifier, TRL's and the references' accuracy), a skip naming
    the install for those alone where it is absent."""
    return pytest.importorskip("math_verify", reason="math-verify not installed: `make install` "
                                                     "(pip install math-verify)")


@pytest.fixture
def trl_rewards():
    """TRL's reward functions (`trl.rewards`) for the tests that compare with them, a skip for those alone without."""
    return pytest.importorskip("trl.rewards", reason="TRL reference not installed; `make install` installs the `refs` "
                                                     "extra")


@pytest.fixture(scope="session")
def notebook_runs(tmp_path_factory) -> NotebookRuns:
    return NotebookRuns(shared_dir(tmp_path_factory, "executed_notebooks"))


@pytest.fixture(scope="session")
def executed_notebooks(notebook_runs):
    """Folder holding <stem>.ipynb for every notebooks/*.py, all executed without error."""
    from workbench.book.notebooks import notebook_sources

    for source in notebook_sources():
        notebook_runs.run(source)
    return notebook_runs.dir


@pytest.fixture(scope="session")
def built_book(executed_notebooks, tmp_path_factory):
    """(html folder, build log) of the book built once (by the first worker that needs it) from the executed
    notebooks."""
    import subprocess
    import sys

    from filelock import FileLock

    out = shared_dir(tmp_path_factory, "book")
    log_file, code_file = out / "build.log", out / "build.returncode"
    with FileLock(out.parent / "book.lock"):
        if not code_file.exists():
            proc = subprocess.run([sys.executable, "-m", "workbench.book", "build", "--executed",
                                   str(executed_notebooks), "--out", str(out)], capture_output=True, text=True)
            log_file.write_text(proc.stdout + proc.stderr)
            code_file.write_text(str(proc.returncode))
    log = log_file.read_text()
    assert code_file.read_text() == "0", log[-6000:]
    return out / "_build" / "html", log
