"""`workbench notebook` / `make run NB=... PRESET=...`: one folder holds the executed notebook and its runs."""
import json

import pytest

from workbench import cli
from workbench.train.metrics import read_rows


@pytest.mark.slow
def test_notebook_command_writes_the_executed_notebook_and_its_run_and_resumes(tmp_path, capsys):
    out = tmp_path / "01-smoke"
    args = ["notebook", "01", "--preset", "smoke", "--out", str(out), "-p", "steps=2"]
    assert cli.main(args) == 0
    assert (out / "01_grpo.ipynb").is_file()
    runs = [p.parent for p in out.glob("*/summary.json")]
    assert len(runs) == 1 and (runs[0] / "report.html").is_file()
    rows = read_rows(runs[0] / "metrics.jsonl")
    assert [r["step"] for r in rows] == [0, 1]
    executed = json.loads((out / "01_grpo.ipynb").read_text())
    assert any("steps = 2" in "".join(c["source"]) for c in executed["cells"])  # papermill's injected parameters
    assert f"run folder: {runs[0]}" in capsys.readouterr().out
    # again: the run resumes from its final checkpoint and trains no step twice (no checkpoint is rewritten)
    checkpoints = {p: p.stat().st_mtime_ns for p in (runs[0] / "checkpoints").rglob("*") if p.is_file()}
    assert cli.main(args) == 0
    assert read_rows(runs[0] / "metrics.jsonl") == rows
    assert checkpoints and {p: p.stat().st_mtime_ns for p in checkpoints} == checkpoints


def test_notebook_command_names_bad_input(tmp_path, capsys):
    assert cli.main(["notebook", "99_nothing", "--out", str(tmp_path)]) == 2
    assert "choose one of" in capsys.readouterr().err
    assert cli.main(["notebook", "01", "--out", str(tmp_path), "-p", "steps"]) == 2
    assert "name=value" in capsys.readouterr().err
