"""The notebooks as the book and `workbench notebook` run them: each percent-format Jupytext source converted and
executed headless with papermill."""
from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterable

from workbench.book import BookError, log as book_log
from workbench.files import pid_alive
from workbench.paths import ROOT

NOTEBOOKS_DIR = ROOT / "notebooks"
PRESET = "smoke"
KERNEL = "python3"


def notebook_sources(notebooks_dir: Path = NOTEBOOKS_DIR) -> list[Path]:
    """The Jupytext sources, sorted by name (the book's chapter order)."""
    return sorted(Path(notebooks_dir).glob("*.py"))


def running_copy(output: Path) -> Path:
    """`NAME.running-<pid>-<n>.ipynb` beside `output`: where papermill writes as the cells run (it saves after each
    one), so `output` changes only when the whole notebook ran. It names its process, for `remove_killed_runs`."""
    return output.with_name(f"{output.stem}.running-{os.getpid()}-{int.from_bytes(os.urandom(4), 'little')}.ipynb")


def failed_copy(output: Path) -> Path:
    """`NAME.failed.ipynb` beside `output`: the partly executed notebook of the last run that failed."""
    return output.with_name(f"{output.stem}.failed.ipynb")


def remove_killed_runs(output: Path) -> list[Path]:
    """Delete the running copies of `output` whose process is gone (killed before it could set its copy aside)."""
    pattern = re.compile(rf"{re.escape(output.stem)}\.running-(\d+)-\d+\.ipynb")
    removed = []
    for path in output.parent.glob(f"{output.stem}.running-*.ipynb"):
        match = pattern.fullmatch(path.name)
        if match and not pid_alive(int(match.group(1))):
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def keep_failed(running: Path, output: Path) -> str:
    """Move a failed run's partial notebook to `failed_copy(output)`; the sentence saying where it and `output` are."""
    if not running.exists():
        return f"no partly executed notebook was written; {output} is as it was" if output.exists() else \
            "no partly executed notebook was written"
    failed = failed_copy(output)
    os.replace(running, failed)
    kept = f"; {output}, from an earlier run, is kept as it was" if output.exists() else ""
    return f"the partly executed notebook is {failed}{kept}"


def execute_notebook(source: Path, output: Path, *, preset: str = PRESET, kernel: str = KERNEL,
                     cwd: Path | None = None, parameters: dict | None = None) -> Path:
    """Convert one percent-format notebook with jupytext and run it headless with papermill.

    The kernel runs in ``cwd`` (default: the notebook's folder) with ``parameters={"preset": preset}`` plus
    any other ``parameters`` (names of the notebook's parameters cell). ``output`` is replaced only by a notebook
    that ran to the end (papermill writes a running copy beside it, renamed on success), so a failed or killed
    rerun never destroys a good executed notebook.
    Raises BookError naming the notebook; the partly executed notebook is kept as ``NAME.failed.ipynb``.
    """
    import jupytext
    import papermill
    from papermill.exceptions import PapermillExecutionError

    source, output = Path(source), Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    remove_killed_runs(output)
    running = running_copy(output)
    with tempfile.TemporaryDirectory(prefix="workbench-nb-") as tmp:
        ipynb = Path(tmp) / f"{source.stem}.ipynb"
        nb = jupytext.read(source)
        nb.metadata.setdefault("kernelspec", {"name": kernel, "display_name": "Python 3", "language": "python"})
        jupytext.write(nb, ipynb)
        try:
            papermill.execute_notebook(
                str(ipynb), str(running), parameters={"preset": preset, **(parameters or {})}, kernel_name=kernel,
                language="python",
                cwd=str(cwd or source.parent), progress_bar=sys.stderr.isatty(), log_output=False,
                # silence ipykernel's start/stop log lines (cell errors still raise below)
                extra_arguments=["--IPKernelApp.log_level=CRITICAL"],
            )
        except PapermillExecutionError as e:
            raise BookError(f"notebook {source.name} failed in the cell run as In [{e.exec_count}] ({e.ename}: "
                            f"{e.evalue}); {keep_failed(running, output)}") from e
        except Exception as e:  # kernel died, missing kernel, bad notebook ...
            raise BookError(f"notebook {source.name} could not be executed: {type(e).__name__}: {e}; "
                            f"{keep_failed(running, output)}") from e
        except BaseException:  # Ctrl-C, SIGTERM: the partial notebook is set aside the same way
            keep_failed(running, output)
            raise
    os.replace(running, output)
    return output


def execute_notebooks(notebooks_dir: Path, out_dir: Path, *,
                      preset: str = PRESET, log: Callable[[str], None] = book_log) -> list[Path]:
    """Execute every ``notebooks_dir/*.py`` into ``out_dir/<stem>.ipynb`` (one at a time)."""
    out_dir = Path(out_dir)
    done = []
    sources = notebook_sources(notebooks_dir)
    for i, source in enumerate(sources, 1):
        log(f"executing {source.name} ({i}/{len(sources)}, preset={preset!r}, cwd={source.parent}) ...")
        t0 = time.perf_counter()
        done.append(execute_notebook(source, out_dir / f"{source.stem}.ipynb", preset=preset))
        log(f"  {source.name} ran in {time.perf_counter() - t0:.1f}s")
    return done


def copy_executed(sources: Iterable[Path], executed_dir: Path, out_dir: Path,
                  log: Callable[[str], None] = book_log) -> list[Path]:
    """Copy ``executed_dir/<stem>.ipynb`` for every source instead of executing it."""
    done = []
    for source in sources:
        src = Path(executed_dir) / f"{Path(source).stem}.ipynb"
        if not src.is_file():
            raise BookError(f"--executed {executed_dir}: no executed notebook {src.name} for {source}")
        log(f"using executed {src}")
        out_dir.mkdir(parents=True, exist_ok=True)
        done.append(Path(shutil.copy2(src, out_dir / src.name)))
    return done
