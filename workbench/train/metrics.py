"""The metrics log: one JSON row per step, appended and flushed as training goes (what each metric means:
`workbench.train.glossary`)."""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from workbench.files import write_atomic


def clean(value):
    """JSON-safe float: NaN/inf become None so rows stay valid JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class MetricsError(ValueError):
    """metrics.jsonl holds something resuming would have to drop."""


TENSORBOARD_INSTALL = "pip install tensorboard (or pip install -e '.[tensorboard]')"


class TensorBoardMissing(ModuleNotFoundError):
    """report_to="tensorboard" without the tensorboard package."""


def summary_writer_class():
    """`torch.utils.tensorboard.SummaryWriter`, or TensorBoardMissing naming the install command."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as err:  # torch.utils.tensorboard imports the tensorboard package
        raise TensorBoardMissing(f"report_to='tensorboard' needs the tensorboard package ({err}); install it: "
                                 f"{TENSORBOARD_INSTALL}") from None
    return SummaryWriter


class TensorBoardLog:
    """The rows of a MetricsLog as TensorBoard scalars (offline event files in `folder`): one scalar per numeric
    metric at step row["step"]; None, NaN/inf, text and flags are skipped. The writer (and its event file) is
    created at the first row, so a process that never logs (a data-parallel rank other than 0) writes nothing."""

    def __init__(self, folder: str | Path):
        self.folder, self.writer_class, self.writer = Path(folder), summary_writer_class(), None
        self.purge_step: int | None = None

    def append(self, row: dict) -> None:
        if self.writer is None:
            # purge_step: TensorBoard hides the events at or after it in earlier event files (steps recomputed
            # after a resume); the rows logged again here are the ones shown
            self.writer = self.writer_class(log_dir=str(self.folder), purge_step=self.purge_step)
        step = row["step"]
        for key, value in row.items():
            value = clean(value)
            if key != "step" and isinstance(value, (int, float)) and not isinstance(value, bool):
                self.writer.add_scalar(key, value, global_step=step)
        self.writer.flush()  # as metrics.jsonl: a crash loses no logged row

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


class MetricsLog:
    """Append-only `metrics.jsonl`; each row is flushed so a crash loses nothing already logged. With
    `tensorboard` (a folder), every row also goes to TensorBoard event files there (`TensorBoardLog`)."""

    def __init__(self, path: str | Path, tensorboard: str | Path | None = None):
        self.path = Path(path)
        self.tensorboard = TensorBoardLog(tensorboard) if tensorboard is not None else None

    def append(self, row: dict) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps({k: clean(v) for k, v in row.items()}) + "\n")
            f.flush()
        if self.tensorboard is not None:
            self.tensorboard.append(row)

    def close(self) -> None:
        """Close the TensorBoard writer (metrics.jsonl is closed after every row)."""
        if self.tensorboard is not None:
            self.tensorboard.close()

    def truncate(self, before_step: int) -> None:
        """Keep only rows with step < before_step (steps after the last checkpoint are recomputed). A torn last
        line (a write cut by a kill) is dropped with a warning; any other damage is refused (`resumable_rows`)."""
        if self.tensorboard is not None and self.tensorboard.writer is None:
            self.tensorboard.purge_step = before_step
        if not self.path.exists():
            return
        rows = [r for r in resumable_rows(self.path) if r["step"] < before_step]
        write_atomic(self.path, "".join(json.dumps(r) + "\n" for r in rows))


def run_log(out: str | Path, config) -> MetricsLog:
    """A trainer's log: RUN/metrics.jsonl, and RUN/tensorboard/ when config.report_to == "tensorboard" (checked
    here, when the trainer is built: a missing package is an error before anything is trained)."""
    out = Path(out)
    board = out / "tensorboard" if getattr(config, "report_to", "none") == "tensorboard" else None
    return MetricsLog(out / "metrics.jsonl", tensorboard=board)


def parse_row(line: str) -> dict:
    row = json.loads(line)
    if not isinstance(row, dict) or not isinstance(row.get("step"), int):
        raise ValueError("not a metrics row (a JSON object with an integer step)")
    return row


def resumable_rows(path: str | Path, warn: bool = True) -> list[dict]:
    """Every row of a metrics.jsonl, or a MetricsError naming the first bad line when one is not the last.

    Only the last line can be torn by an interrupted append; a bad line before others is damage (a disk error,
    a hand edit), and dropping the rows after it would lose them silently."""
    path = Path(path)
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    rows = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rows.append(parse_row(line))
        except ValueError as err:  # JSONDecodeError is a ValueError
            if number == len(lines):
                if warn:
                    print(f"warning: {path}: dropped a torn last line {number} ({line[:60]!r}): an interrupted write",
                          file=sys.stderr)
                break
            raise MetricsError(
                f"{path}:{number}: not a metrics row ({err}); {len(lines) - number} lines follow it, and resuming "
                f"would have to drop them. Repair or delete line {number} (the rows after it are kept), then run "
                f"the same command again") from None
    return rows


def read_rows(path: str | Path) -> list[dict]:
    """Rows of a metrics.jsonl for reading (reports, comparisons): lines that do not parse are skipped."""
    path = Path(path)
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            rows.append(parse_row(line))
        except ValueError:
            continue
    return rows
