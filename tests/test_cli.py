"""The `workbench` command line: list (with each component's source), show, bad input, and `workbench notebook` /
`make run NB=... PRESET=...` (one folder holds the executed notebook and its runs)."""
import errno
import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from workbench import cli, registry
from workbench.paths import ROOT
from workbench.recipes import RECIPES, Recipe
from workbench.train.metrics import read_rows


def test_list_json_has_the_promised_fields(capsys):
    assert cli.main(["list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["key"] for r in rows} >= {"grpo", "rloo", "ppo-clip", "k3", "token-mean", "ppo"}
    for row in rows:
        assert {"key", "kind", "family", "title", "confidence", "source"} <= set(row)
        assert row["family"] and row["confidence"] in ("exact", "partial", "abstract-only")
    ppo = next(r for r in rows if (r["kind"], r["key"]) == ("objective", "ppo-clip"))
    assert {"clip/high", "ratio/mean"} <= set(ppo["logs"])  # the metrics it declares (`registry.Entry.logs`)


def defined_at(entry) -> str:
    """Where `inspect` finds a component's code: "workbench/advantages/group.py:73"."""
    fn = inspect.unwrap(entry.fn)
    return f"{Path(inspect.getsourcefile(fn)).resolve().relative_to(ROOT).as_posix()}:{inspect.getsourcelines(fn)[1]}"


def test_list_prints_every_entry_with_the_file_and_line_that_registers_it(capsys):
    assert cli.main(["list"]) == 0
    rows = [line.split(maxsplit=5) for line in capsys.readouterr().out.splitlines() if re.search(r"\.py:\d+ ", line)]
    printed = {(kind, key): source for kind, key, _, _, source, _ in rows}
    entries = registry.entries()
    assert set(printed) == {(e.kind, e.key) for e in entries}
    for e in entries:
        if e.kind != "recipe":
            assert printed[e.kind, e.key] == defined_at(e), e.key
        else:  # a recipe is data: its line is the define(...) that registers it
            path, line = printed[e.kind, e.key].split(":")
            lines = (ROOT / path).read_text().splitlines()[int(line) - 1:]
            assert lines[0].startswith("define(") and f'key="{e.key}"' in "".join(lines[:3]), e.key


@pytest.mark.parametrize("argv", [["--help"], ["list"], ["list", "--missing"], ["show", "no-such-key"]])
def test_help_and_list_import_no_torch(argv):
    code = ("import sys\nfrom workbench import cli\ntry:\n    cli.main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "print('torch' in sys.modules, file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True)
    assert proc.stderr.splitlines()[-1] == "False", proc.stderr[-2000:]


def test_show_prints_a_components_card_recipes_and_tests(capsys):
    assert cli.main(["show", "ppo-clip"]) == 0
    out = capsys.readouterr().out
    entry = registry.get("objective", "ppo-clip")
    assert out.startswith(f"objective ppo-clip: {entry.title}")
    assert f"source {defined_at(entry)}" in out and " ".join(entry.equation.split()) in out
    assert "defaults    " + ", ".join(f"{k}={v!r}" for k, v in entry.defaults.items()) in out
    users = sorted(k for k, r in RECIPES.items() if isinstance(r, Recipe) and r.objective.key == "ppo-clip")
    assert f"recipes     {', '.join(users)} ({len(users)})" in out
    # a test marked covers("ppo-clip"), found here by reading its file
    source = (ROOT / "tests" / "anchors" / "test_trl.py").read_text()
    marked = re.search(r'@pytest\.mark\.covers\("ppo-clip"\)\n(?:@.*\n)*def (test_\w+)', source).group(1)
    assert re.search(rf"^    tests/anchors/test_trl\.py: .*\b{marked}\b", out, re.M)


def test_show_prints_a_recipes_components_and_claims(capsys):
    from workbench.results.claims import CLAIMS, claims_table

    assert cli.main(["show", "dr_grpo"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("recipe dr_grpo: ") and out.count("\nrecipe ") == 0  # a recipe only: one card
    assert "components  " in out and "advantage grpo" in out and "aggregation seq-mean-token-sum-norm" in out
    claims = [c for c in CLAIMS if c.key == "dr_grpo"]
    assert claims and all(f"claim       {c.claim}" in out for c in claims)
    assert all(f"verdict   {row['verdict']} ({row['comparison']})" in out for row in claims_table(recipes=["dr_grpo"]))
    assert "test_every_recipe_trains_end_to_end_and_resumes_exactly[dr_grpo]" in out


def test_show_refuses_an_unknown_key_naming_close_ones(capsys):
    assert cli.main(["show", "grpoo"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no component or recipe named 'grpoo'; close matches: grpo")
    assert cli.main(["show", "grpo", "--kind", "objective"]) == 2
    assert "'grpo' is registered as: advantage, recipe" in capsys.readouterr().err
    assert cli.main(["show", "grpo", "--kind", "advantages"]) == 2
    assert "unknown kind 'advantages'; kinds are reference, sampler, rollout" in capsys.readouterr().err


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


@pytest.mark.parametrize("command", [["run", "grpo", "--task", "addition"],
                                     ["compare", "grpo", "--task", "addition", "--seeds", "1"],
                                     ["notebook", "01"], ["eval", "tiny", "--task", "addition"], ["export", "RUN"]])
def test_out_naming_an_existing_file_is_refused_before_anything_runs(capsys, tmp_path, command):
    taken = tmp_path / "notes.txt"
    taken.write_text("mine")
    run = tmp_path / "run"
    run.mkdir()
    args = [str(run) if a == "RUN" else a for a in command] + ([str(taken)] if command[0] == "export"
                                                               else ["--out", str(taken)])
    assert cli.main(args) == 2
    captured = capsys.readouterr()
    assert str(taken) in captured.err and ("is a file" in captured.err or "exists" in captured.err), captured.err
    assert "nothing was" in captured.err and "Traceback" not in captured.err
    assert "accuracy" not in captured.out  # nothing was trained or evaluated
    assert taken.read_text() == "mine" and sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "run"]
    assert not list(run.iterdir())


def test_eval_checks_its_out_before_evaluating_and_creates_its_folder(capsys, tmp_path):
    args = ["eval", "tiny", "--task", "addition", "--set", "eval_size=4", "--set", "max_new_tokens=2"]
    under_file = tmp_path / "notes.txt"
    under_file.write_text("mine")
    for out, problem in ((tmp_path, "is a folder"), (under_file / "x.jsonl", f"its folder {under_file} is a file")):
        assert cli.main([*args, "--out", str(out)]) == 2
        captured = capsys.readouterr()
        assert problem in captured.err and "greedy accuracy" not in captured.out  # refused before evaluating
    records = tmp_path / "missing" / "dir" / "x.jsonl"
    assert cli.main([*args, "--out", str(records)]) == 0
    assert f"records: {records}" in capsys.readouterr().out
    assert len(records.read_text().splitlines()) == 4 and os.listdir(records.parent) == ["x.jsonl"]


def test_os_errors_are_reported_in_words_with_their_path(capsys, tmp_path):
    missing = tmp_path / "missing" / "x.jsonl"
    with pytest.raises(OSError) as info:
        open(missing, "w")
    assert cli.exit_status(info.value) == 2
    assert capsys.readouterr().err == f"error: No such file or directory: {missing}\n"
    assert cli.exit_status(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(missing))) == 1
    assert capsys.readouterr().err == f"error: No space left on device: {missing}\n"
    assert cli.exit_status(FileNotFoundError(f"no notebook {missing}")) == 2  # our own messages as they are
    assert capsys.readouterr().err == f"error: no notebook {missing}\n"
