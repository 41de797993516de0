"""The `workbench` command line: list, bad input, and `workbench notebook` / `make run NB=... PRESET=...`
(one folder holds the executed notebook and its runs)."""
import json

import pytest

from workbench import cli, registry
from workbench.train.metrics import read_rows


def test_list_json_has_the_promised_fields(capsys):
    assert cli.main(["list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["key"] for r in rows} >= {"grpo", "rloo", "ppo-clip", "k3", "token-mean", "ppo"}
    for row in rows:
        assert {"key", "kind", "family", "title", "confidence"} <= set(row)
        assert row["family"] and row["confidence"] in ("exact", "partial", "abstract-only")


def test_list_missing_prints_unregistered_catalog_keys(capsys):
    assert cli.main(["list", "--missing"]) == 0
    printed = {line.split()[0] for line in capsys.readouterr().out.splitlines() if line.strip()}
    assert printed == set(registry.missing_keys())
    assert "grpo" not in printed and printed <= set(registry.catalog())


def test_cli_reports_bad_input_without_a_traceback(capsys, tmp_path):
    assert cli.main(["run", "grpo", "--set", "stepz=3", "--out", str(tmp_path / "r")]) == 2
    assert "unknown config key 'stepz'" in capsys.readouterr().err
    assert cli.main(["report", str(tmp_path)]) == 2
    assert "not a run folder" in capsys.readouterr().err


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
