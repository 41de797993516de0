"""A run folder owned by one process at a time, whose files are only ever replaced whole (`workbench.files`).

- `FolderLock`: an advisory `flock` on `<folder>/.lock` (the file holds the owner's pid, for the message a
  second process gets). The kernel drops it when the owner exits, however it exits, so a killed run never
  leaves a folder locked. Re-entrant within a process (a notebook may build two trainers on one folder).
- `claim_run_folder`: the lock, the removal of what killed writers left, and the check that the folder holds
  this run's config (or none yet), before a trainer builds anything. It writes no config.json:
- `open_run_folder` does, once the run's set-up passed every check (task, recipe, data files, models built), so a
  run refused for a bad setting leaves no config.json to block the corrected command.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from workbench.files import check_folder_path, remove_stale_temps, write_atomic

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; the folder is then unguarded
    fcntl = None

LOCK_FILE = ".lock"


class RunFolderBusy(ValueError):
    """Another process holds the run folder."""


_held: dict[str, list] = {}  # resolved folder -> [fd, holders in this process]


class FolderLock:
    """The advisory lock that makes one process the writer of `folder`."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self.key = str(self.folder.resolve())
        self.acquired = False

    def acquire(self) -> "FolderLock":
        if self.acquired:
            return self
        if self.key in _held:
            _held[self.key][1] += 1
        else:
            self.folder.mkdir(parents=True, exist_ok=True)
            path = self.folder / LOCK_FILE
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            if fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
                    os.close(fd)
                    raise RunFolderBusy(
                        f"run folder {self.folder} is in use by process {holder}; wait for that run to finish (or "
                        f"stop it: kill {holder}), or choose another --out") from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            _held[self.key] = [fd, 1]
        self.acquired = True
        return self

    def release(self) -> None:
        if not self.acquired:
            return
        self.acquired = False
        entry = _held[self.key]
        entry[1] -= 1
        if entry[1] == 0:
            del _held[self.key]
            os.close(entry[0])  # closing the descriptor drops the flock

    def __enter__(self) -> "FolderLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def check_run_config(out: Path, config_json: str, defaults_json: str = "{}") -> None:
    """Refuse a folder whose config.json holds another run's config, or is damaged; a folder without one (new, or
    a run refused before it was written) is this run's. Nothing is written.

    Fields added to the config since the folder was written count as their defaults (`defaults_json`), so an
    upgrade does not orphan runs.
    """
    path = out / "config.json"
    if not path.exists():
        return
    try:
        written = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path} is not valid JSON ({err}); restore it, or choose another --out") from None
    saved, mine = {**json.loads(defaults_json), **written}, json.loads(config_json)
    if saved != mine:
        diff = sorted(k for k in set(saved) | set(mine) if saved.get(k) != mine.get(k))
        raise ValueError(f"{out} holds a run with a different config (differs in {diff}); "
                         "choose another --out, or delete the folder to start over")


def write_run_config(out: Path, config_json: str) -> None:
    """config.json of a new run (an existing one, checked equal, is left as it is)."""
    out.mkdir(parents=True, exist_ok=True)
    if not (out / "config.json").exists():
        write_atomic(out / "config.json", config_json)


def prepare_run_folder(out: Path, config_json: str, defaults_json: str = "{}") -> None:
    """Create the run folder, or check that an existing one holds this same config (then it resumes).

    A different config is an error: nothing a user ran is overwritten."""
    check_run_config(out, config_json, defaults_json)
    write_run_config(out, config_json)


def claim_run_folder(out: Path, config) -> FolderLock:
    """Lock `out` for this process, clear what killed writers left, and refuse another run's config.json (this
    run's is written by `open_run_folder`, after the set-up's checks)."""
    check_folder_path(out)
    lock = FolderLock(out).acquire()
    try:
        if out.is_dir():  # (a checkpoint's temporary folder is cleared by the next save of that step)
            remove_stale_temps(out)
        check_run_config(out, config.to_json(), type(config)().to_json())
    except BaseException:
        lock.release()
        raise
    return lock


def open_run_folder(out: Path, config) -> None:
    """What a run writes once its set-up passed every check: config.json for a new run, and, resuming, the
    checkpoints rotated down to keep_checkpoints (a run killed between a checkpoint's rename and the rotation
    left one more)."""
    from workbench.train.checkpoint import rotate_checkpoints  # (torch: not for the lock alone)

    write_run_config(out, config.to_json())
    rotate_checkpoints(out, config.keep_checkpoints)


def write_run_results(out: Path, summary: dict, records: list[dict]) -> None:
    """summary.json and eval_after.jsonl (the held-out episodes after training), each replaced whole."""
    write_atomic(out / "eval_after.jsonl", "".join(json.dumps(r) + "\n" for r in records))
    write_atomic(out / "summary.json", json.dumps(summary, indent=2))
