"""The way out of a run folder: `workbench export` (full, LoRA merged, PEFT adapter; RL and preference runs),
`workbench eval` (the runs' own held-out evaluation), RUN/warm_start.json, and report_to="tensorboard"."""
import json
import shlex
import shutil
import sys

import pytest
import torch

from tests.helpers import TINY, Interrupt, run_task
from workbench import cli
from workbench.files import read_jsonl
from workbench.train import make_config, train
from workbench.train.metrics import read_rows

# a warm start the tiny model learns something from in seconds: one-digit addition, greedy accuracy ~0.3
SFT = dict(task_kw={"digits": 1}, sft_steps=80, sft_batch=32)
EVAL = ["--task", "addition", "--set", "eval_size=16", "--set", "max_new_tokens=6", "--set", 'task_kw={"digits":1}']


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One SFT cache for the module's runs (the warm start is trained once)."""
    with pytest.MonkeyPatch.context() as mp:
        folder = tmp_path_factory.mktemp("cache")
        mp.setenv("WORKBENCH_CACHE", str(folder))
        yield folder


@pytest.fixture(scope="module")
def full_run(cache, tmp_path_factory):
    out = tmp_path_factory.mktemp("full") / "run"
    train(make_config("smoke", recipe="grpo", **{**TINY, **SFT}), out, progress=False, report=False)
    return out


@pytest.fixture(scope="module")
def lora_run(cache, tmp_path_factory):
    out = tmp_path_factory.mktemp("lora") / "run"
    train(make_config("smoke", recipe="grpo", **{**TINY, **SFT, "lora_r": 4}), out, progress=False, report=False)
    return out


def summary(run):
    return json.loads((run / "summary.json").read_text())


def evaluate(capsys, model, tmp_path):
    """`workbench eval MODEL` with the runs' evaluation settings: (accuracy, records)."""
    records = tmp_path / f"records-{len(list(tmp_path.glob('records-*')))}.jsonl"
    assert cli.main(["eval", str(model), *EVAL, "--out", str(records)]) == 0
    printed = capsys.readouterr().out
    assert "greedy accuracy of" in printed and "16 held-out prompts" in printed
    rows = read_jsonl(records)
    return sum(r["correct"] for r in rows) / len(rows), rows


def export(capsys, *args) -> str:
    assert cli.main(["export", *map(str, args), "--quiet"]) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def test_full_run_exports_a_transformers_folder_scored_exactly_as_the_run(full_run, tmp_path, capsys):
    from transformers import AutoModelForCausalLM

    out = tmp_path / "model"
    printed = export(capsys, full_run, out)
    assert f"exported step 4 of {full_run} (weights)" in printed
    model = AutoModelForCausalLM.from_pretrained(out)
    final = torch.load(full_run / "checkpoints" / "step_000004" / "state.pt", weights_only=False)["model"]
    assert all(torch.equal(model.state_dict()[k], v) for k, v in final.items())
    assert (out / "tokenizer.json").exists() and json.loads((out / "workbench_export.json").read_text())["step"] == 4
    accuracy, records = evaluate(capsys, out, tmp_path)
    assert accuracy == summary(full_run)["accuracy_after"] > 0  # the SFT'd model gets some right
    assert records == read_jsonl(full_run / "eval_after.jsonl")
    # the command export prints repeats the run's evaluation as it is
    command = shlex.split(printed.split("score it: ")[1].strip())
    assert command[:2] == ["workbench", "eval"] and cli.main(command[1:]) == 0
    assert f"{accuracy:.4f}" in capsys.readouterr().out


def test_step_picks_an_earlier_checkpoint_and_a_missing_step_names_the_kept_ones(full_run, tmp_path, capsys):
    from transformers import AutoModelForCausalLM

    export(capsys, full_run, tmp_path / "final")
    export(capsys, full_run, "--step", 2, tmp_path / "early")
    final, early = (AutoModelForCausalLM.from_pretrained(tmp_path / name).state_dict() for name in ("final", "early"))
    assert any(not torch.equal(final[k], early[k]) for k in final)
    assert cli.main(["export", str(full_run), "--step", "3", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "no checkpoint of step 3; kept steps: 2, 4" in err
    assert not (tmp_path / "none").exists()


def test_export_refuses_a_non_empty_out_and_leaves_it_as_it_was(full_run, tmp_path, capsys):
    out = tmp_path / "taken"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert cli.main(["export", str(full_run), str(out)]) == 2
    assert "is not an empty folder" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith((".taken", "taken."))]  # no temporary left behind
    (out / "notes.txt").unlink()
    export(capsys, full_run, out)  # an empty folder is filled
    assert (out / "config.json").exists()
    assert cli.main(["export", str(full_run), str(tmp_path / "x"), "--adapter"]) == 2
    assert "lora_r=0" in capsys.readouterr().err


KILLED_EXPORT = """
import os, signal, sys
import workbench.models as models
real = models.save_model
def save_then_die(model, tokenizer, folder):  # SIGKILL once the weights are written, before the rename
    real(model, tokenizer, folder)
    os.kill(os.getpid(), signal.SIGKILL)
models.save_model = save_then_die
from workbench.cli import main
main(["export", sys.argv[1], sys.argv[2], "--quiet"])
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_killed_exports_temporary_folder_is_removed_by_the_next_export_into_the_same_place(full_run, tmp_path,
                                                                                             capsys):
    import re
    import subprocess

    out = tmp_path / "model"
    killed = subprocess.run([sys.executable, "-c", KILLED_EXPORT, str(full_run), str(out)], capture_output=True,
                            text=True)
    assert killed.returncode == -9, killed.stderr
    (left,) = tmp_path.iterdir()  # seen in `ls`, named after OUT: the user can tell what it is
    assert re.fullmatch(r"model\.tmp-\d+-\d+", left.name) and (left / "model.safetensors").exists()
    assert cli.main(["export", str(full_run), str(out), "--quiet"]) == 0
    assert f"removed {left}, the unfinished folder of an export into {out} that was killed" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["model"] and (out / "config.json").exists()


def test_eval_names_what_it_cannot_score(full_run, tmp_path, capsys):
    assert cli.main(["eval", str(full_run), *EVAL]) == 2
    assert "is a run folder, not a model folder: export it first" in capsys.readouterr().err
    assert cli.main(["eval", str(tmp_path / "nothing"), *EVAL]) == 2
    assert "is not a built-in model" in capsys.readouterr().err
    assert cli.main(["eval", "smollm", *EVAL]) == 2
    assert "did you mean 'smollm2'?" in capsys.readouterr().err


def test_lora_run_exports_merged_and_as_an_adapter_both_scored_as_the_run(lora_run, tmp_path, capsys):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    expected = summary(lora_run)["accuracy_after"]
    record = json.loads((lora_run / "warm_start.json").read_text())
    assert record["sft_steps"] == 80 and record["path"].endswith(record["key"])
    export(capsys, lora_run, tmp_path / "merged")
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged")
    assert not any("lora" in k for k in merged.state_dict())
    accuracy, records = evaluate(capsys, tmp_path / "merged", tmp_path)
    assert accuracy == expected > 0 and records == read_jsonl(lora_run / "eval_after.jsonl")

    printed = export(capsys, lora_run, tmp_path / "adapter", "--adapter")
    assert "(PEFT adapter)" in printed
    meta = json.loads((tmp_path / "adapter" / "workbench_export.json").read_text())
    assert meta["format"] == "adapter" and meta["base"] == record["path"]  # the run's SFT warm start
    peft_model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(meta["base"]), tmp_path / "adapter")
    torch.testing.assert_close(peft_model.merge_and_unload().state_dict(), merged.state_dict())
    assert evaluate(capsys, tmp_path / "adapter", tmp_path)[0] == expected  # eval loads the adapter through peft


def test_export_rebuilds_a_warm_start_whose_cache_folder_is_gone(lora_run, tmp_path, capsys, monkeypatch):
    from transformers import AutoModelForCausalLM

    export(capsys, lora_run, tmp_path / "before")
    cached = json.loads((lora_run / "warm_start.json").read_text())["path"]
    aside = tmp_path / "aside"
    shutil.move(cached, aside)
    try:
        monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "fresh-cache"))
        assert cli.main(["export", str(lora_run), str(tmp_path / "after"), "--quiet"]) == 0
        assert "is gone; rebuilding it from the run's config" in capsys.readouterr().err
    finally:
        shutil.move(aside, cached)
    before, after = (AutoModelForCausalLM.from_pretrained(tmp_path / n).state_dict() for n in ("before", "after"))
    assert all(torch.equal(before[k], after[k]) for k in before)  # SFT is deterministic on the same machine


def test_preference_lora_run_exports_merged_scored_as_the_run(cache, tmp_path, capsys):
    config = make_config("smoke", recipe="dpo", **{**TINY, **SFT, "lora_r": 4, "pairs": 16, "steps": 2})
    run = tmp_path / "dpo"
    train(config, run, progress=False, report=False)
    assert json.loads((run / "warm_start.json").read_text())["path"] is not None
    export(capsys, run, tmp_path / "merged")
    assert evaluate(capsys, tmp_path / "merged", tmp_path)[0] == summary(run)["accuracy_after"]
    export(capsys, run, tmp_path / "adapter", "--adapter")
    assert evaluate(capsys, tmp_path / "adapter", tmp_path)[0] == summary(run)["accuracy_after"]


def test_an_in_code_base_travels_with_the_adapter(tmp_path, capsys):
    run = tmp_path / "run"
    train(make_config("smoke", recipe="grpo", **{**TINY, "lora_r": 4, "steps": 2}), run, progress=False,
          report=False)
    record = json.loads((run / "warm_start.json").read_text())
    assert record == {"path": None, "key": None, "sft_steps": 0, "data": None, "model": None}
    export(capsys, run, tmp_path / "adapter", "--adapter")
    export(capsys, run, tmp_path / "merged")
    meta = json.loads((tmp_path / "adapter" / "workbench_export.json").read_text())
    assert meta["base"] == str((tmp_path / "adapter" / "base").resolve())  # "tiny" is built in code
    assert evaluate(capsys, tmp_path / "adapter", tmp_path)[1] == evaluate(capsys, tmp_path / "merged", tmp_path)[1]


def test_a_lora_run_started_from_a_soup_exports_onto_that_soup(cache, tmp_path, capsys):
    """SALSA's policy starts at (and its adapter sits on) the average of two SFT models, not the warm start."""
    config = make_config("smoke", recipe="grpo", **{**TINY, **SFT, "lora_r": 4, "steps": 2,
                                                    "recipe_overrides": {"reference": ["salsa", {"runs": 2}]}})
    train(config, tmp_path / "run", progress=False, report=False)
    export(capsys, tmp_path / "run", tmp_path / "merged")
    export(capsys, tmp_path / "run", tmp_path / "adapter", "--adapter")
    assert (tmp_path / "adapter" / "base" / "config.json").exists()  # the soup is no folder of its own
    records = read_jsonl(tmp_path / "run" / "eval_after.jsonl")
    assert evaluate(capsys, tmp_path / "merged", tmp_path)[1] == records
    assert evaluate(capsys, tmp_path / "adapter", tmp_path)[1] == records


def scalars(folder, tag):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder))
    events.Reload()
    return [(s.step, s.value) for s in events.Scalars(tag)]


def test_report_to_tensorboard_writes_every_logged_row_and_a_resume_replaces_recomputed_steps(tmp_path):
    import numpy as np

    config = make_config("smoke", recipe="grpo", **{**TINY, "report_to": "tensorboard"})
    out = tmp_path / "run"
    with pytest.raises(Interrupt):
        run_task(config, out, stop_after_step=2)  # steps 0-2 logged, checkpoint at 2: step 2 is recomputed
    run_task(config, out)
    rows = read_rows(out / "metrics.jsonl")
    assert [r["step"] for r in rows] == [0, 1, 2, 3]
    for tag in ("reward/mean", "kl", "grad_norm", "entropy"):
        assert scalars(out / "tensorboard", tag) == [(r["step"], float(np.float32(r[tag]))) for r in rows]
    assert len(list((out / "tensorboard").glob("events.out.tfevents.*"))) == 2  # one per session


def test_report_to_tensorboard_without_the_package_is_refused_before_anything_runs(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # as if tensorboard were not installed
    out = tmp_path / "run"
    assert cli.main(["run", "grpo", "--task", "addition", "--out", str(out), "--set", "report_to=tensorboard"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: report_to='tensorboard' needs the tensorboard package")
    assert "pip install tensorboard" in err
    assert not out.exists()
