"""Files replaced whole: write a temporary sibling, fsync, rename over the target. A reader, or a process
killed mid-write, sees the old file or the new one, never a torn one; the temporaries a killed writer leaves
carry its pid, so the next writer can tell they are stale and delete them."""
from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

TEMP_NAME = re.compile(r"\.tmp-(\d+)-\d+$")
LEGACY_TEMP = re.compile(r"\.tmp\d+$")  # before temporaries named their writer: stale once a day old
LEGACY_STALE_S = 24 * 3600


def temp_sibling(path: Path, hidden: bool = True) -> Path:
    """`.name.tmp-<pid>-<n>` beside `path`: unique per writer, and it names the writer for `remove_stale_temps`.
    `hidden=False` drops the dot (`name.tmp-<pid>-<n>`): a model-sized temporary a user should see in `ls`."""
    prefix = "." if hidden else ""
    return path.with_name(f"{prefix}{path.name}.tmp-{os.getpid()}-{int.from_bytes(os.urandom(4), 'little')}")


def replace_atomic(path: str | Path, write) -> Path:
    """Replace `path` in one rename with what `write(binary file)` writes into a temporary sibling."""
    path = Path(path)
    tmp = temp_sibling(path)
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_atomic(path: str | Path, data: str | bytes) -> Path:
    """Replace `path` with `data` in one rename (text is written as UTF-8)."""
    return replace_atomic(path, lambda f: f.write(data.encode("utf-8") if isinstance(data, str) else data))


def save_atomic(obj, path: str | Path) -> Path:
    """`torch.save(obj, path)`, replacing the file in one rename (streamed: no second copy in memory)."""
    import torch

    return replace_atomic(path, lambda f: torch.save(obj, f))


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        return True
    return True


def remove_stale_temps(folder: Path, of: str | None = None) -> list[Path]:
    """Delete the temporary files and folders in `folder` whose writer (the pid in their name) is gone; with `of`,
    only the temporaries of that name (`temp_sibling(folder / of)`): one export's, in a folder holding other
    things."""
    removed = []
    own = None if of is None else re.compile(rf"\.?{re.escape(of)}\.tmp-\d+-\d+")
    for path in folder.glob("*.tmp*"):
        if own is not None and not own.fullmatch(path.name):
            continue
        match = TEMP_NAME.search(path.name)
        if match and not pid_alive(int(match.group(1))) or (own is None and LEGACY_TEMP.search(path.name)
                                                            and time.time() - path.stat().st_mtime > LEGACY_STALE_S):
            shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def nearest_existing(path: Path) -> Path:
    """`path` itself or its closest parent that exists."""
    path = Path(path).absolute()
    return next(p for p in (path, *path.parents) if p.exists())


def folder_problem(path: Path) -> str | None:
    """Why `path` cannot be (or become) a folder this user writes in, or None."""
    existing = nearest_existing(path)
    if not existing.is_dir():
        return "is a file" if existing == path.absolute() else f"lies under {existing}, which is a file"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"lies in {existing}, which this user cannot write"
    return None


def check_folder_path(path: str | Path, option: str = "--out") -> Path:
    """Refuse, before a command runs, a folder it would write in that cannot be one: an existing file, a path under
    a file, or under a folder this user cannot write. The folder may exist (a run resumes there)."""
    path = Path(path)
    problem = folder_problem(path)
    if problem:
        raise ValueError(f"{option} {path} {problem}, not a folder to write in; nothing was run. Choose another "
                         f"{option}")
    return path


def check_new_file(path: str | Path, option: str = "--out") -> Path:
    """Refuse, before a command runs, a file it would write at the end that it could not write, or that exists
    (nothing a user made is replaced); create its folder now, so the end cannot fail on it."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{option} {path} is a folder; give a file's path in it (e.g. {path / 'records.jsonl'}); "
                         "nothing was run")
    if path.exists() or path.is_symlink():
        raise ValueError(f"{option} {path} exists; nothing was run. Choose another {option}, or delete it first")
    problem = folder_problem(path.parent)
    if problem:
        raise ValueError(f"{option} {path}: its folder {path.parent} {problem}; nothing was run. Choose another "
                         f"{option}")
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def read_jsonl(path: str | Path) -> list[dict]:
    """The JSON objects of a JSONL file, one per non-blank line; a line that is not one is a ValueError naming
    the file and line number (not a parser traceback)."""
    rows = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{number}: not valid JSON ({err.msg} at column {err.colno}): "
                                 f"{line.strip()[:60]!r}; fix or delete that line") from None
            if not isinstance(row, dict):
                raise ValueError(f"{path}:{number}: expected a JSON object per line, got {type(row).__name__}")
            rows.append(row)
    return rows
