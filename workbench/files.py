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


def temp_sibling(path: Path) -> Path:
    """`.name.tmp-<pid>-<n>` beside `path`: unique per writer, and it names the writer for `remove_stale_temps`."""
    return path.with_name(f".{path.name}.tmp-{os.getpid()}-{int.from_bytes(os.urandom(4), 'little')}")


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


def remove_stale_temps(folder: Path) -> list[Path]:
    """Delete the temporary files and folders in `folder` whose writer (the pid in their name) is gone."""
    removed = []
    for path in folder.glob("*.tmp*"):
        match = TEMP_NAME.search(path.name)
        if match and not pid_alive(int(match.group(1))) or (
                LEGACY_TEMP.search(path.name) and time.time() - path.stat().st_mtime > LEGACY_STALE_S):
            shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
            removed.append(path)
    return removed




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
