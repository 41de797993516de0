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
    ppo = next(r for r in rows if (r["kind"], r["key"]) == ("objective", "ppo-clip"))
    assert {"clip/high", "ratio/mean"} <= set(ppo["logs"])  # the metrics it declares (`registry.Entry.logs`)


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


@pytest.mark.parametrize("assignment, field", [("steps=abc", "steps"), ("lr=nan", "lr"), ("lr=fast", "lr"),
                                               ("minibatches=0", "minibatches"), ("steps=2.7", "steps"),
                                               ("kl_coef=-1", "kl_coef"), ("temperature=0", "temperature")])
def test_a_bad_set_value_is_refused_before_anything_is_written(capsys, tmp_path, assignment, field):
    out = tmp_path / "r"
    assert cli.main(["run", "grpo", "--set", assignment, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and f"config field {field}" in err and "Traceback" not in err
    assert not out.exists()  # no config.json to block the corrected command


def test_a_group_baseline_with_one_sample_is_refused_before_anything_is_written(capsys, tmp_path):
    assert cli.main(["run", "grpo", "--task", "addition", "--set", "group_size=1", "--out", str(tmp_path / "r")]) == 2
    assert "allow_singletons=true" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_compare_checks_every_recipe_before_training_any(capsys, tmp_path):
    args = ["compare", "grpo", "nope", "--task", "addition", "--seeds", "1", "--out", str(tmp_path / "c"),
            "--set", "steps=1", "--set", "sft_steps=0"]
    assert cli.main(args) == 2
    assert "no recipe named 'nope'" in capsys.readouterr().err
    assert not list(tmp_path.rglob("metrics.jsonl"))
    assert cli.main(["compare", "grpo", "grpo", "--out", str(tmp_path / "c")]) == 2
    assert "['grpo'] are listed more than once" in capsys.readouterr().err


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
