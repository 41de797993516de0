"""Checkpoints: a damaged one is set aside with a warning and the previous kept one is used; a run killed before a
rotation keeps keep_checkpoints once resumed."""
import os
import signal
import subprocess
import sys

import pytest
import torch

from workbench.train.checkpoint import (PIPELINE_FILE, CheckpointError, kept_checkpoints, load_latest_checkpoint,
                                       load_pipeline_state, save_checkpoint)


def test_a_damaged_checkpoint_falls_back_to_the_previous_kept_one(tmp_path, capsys):
    for step in (2, 4):
        save_checkpoint(tmp_path, step, {"step": step, "w": torch.full((3,), float(step))}, keep=2)
    newest = kept_checkpoints(tmp_path)[-1] / "state.pt"
    newest.write_bytes(newest.read_bytes()[:100])  # a disk error tore it
    state = load_latest_checkpoint(tmp_path)
    assert state["step"] == 2 and torch.equal(state["w"], torch.full((3,), 2.0))
    assert "checkpoint" in capsys.readouterr().err and "damaged" in "".join(p.name for p in
                                                                          (tmp_path / "checkpoints").iterdir())
    assert (tmp_path / "checkpoints" / "step_000004.damaged" / "state.pt").exists()  # kept for inspection
    assert [p.name for p in kept_checkpoints(tmp_path)] == ["step_000002"]


def test_the_pipeline_state_is_a_file_of_its_own_and_a_damaged_one_falls_back_too(tmp_path, capsys):
    """Buffers and samplers (the components' state) sit in pipeline.pt beside state.pt: readable without the model,
    restored with it, and a torn pipeline.pt sets its checkpoint aside like a torn state.pt."""
    for step in (2, 4):
        save_checkpoint(tmp_path, step, {"step": step, "pipeline": {"buffer:x": {"rows": [step] * 3}}}, keep=2)
    newest = kept_checkpoints(tmp_path)[-1]
    assert load_pipeline_state(newest) == {"buffer:x": {"rows": [4, 4, 4]}}
    assert "pipeline" not in torch.load(newest / "state.pt", weights_only=False)
    assert load_latest_checkpoint(tmp_path)["pipeline"] == {"buffer:x": {"rows": [4, 4, 4]}}
    (newest / PIPELINE_FILE).write_bytes((newest / PIPELINE_FILE).read_bytes()[:50])
    state = load_latest_checkpoint(tmp_path)
    assert state["step"] == 2 and state["pipeline"] == {"buffer:x": {"rows": [2, 2, 2]}}
    assert (tmp_path / "checkpoints" / "step_000004.damaged" / PIPELINE_FILE).exists()
    assert "damaged" in capsys.readouterr().err


def test_no_readable_checkpoint_is_an_error_that_says_what_to_do(tmp_path):
    save_checkpoint(tmp_path, 2, {"step": 2}, keep=2)
    (kept_checkpoints(tmp_path)[0] / "state.pt").write_bytes(b"\x00" * 10)
    with pytest.raises(CheckpointError, match="no kept checkpoint .* can be read.*choose another --out"):
        load_latest_checkpoint(tmp_path)
    assert load_latest_checkpoint(tmp_path / "fresh") is None


KILLED_AT_ROTATION = """
import os, signal, sys
import workbench.train.checkpoint as checkpoint
real = checkpoint.kept_checkpoints
def kept_or_killed(out):  # SIGKILL between the final checkpoint's rename and the rotation after it
    if (out / "checkpoints" / "step_000003").exists():
        os.kill(os.getpid(), signal.SIGKILL)
    return real(out)
checkpoint.kept_checkpoints = kept_or_killed
from workbench.cli import main
main(sys.argv[1:])
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_run_killed_before_its_last_rotation_keeps_keep_checkpoints_once_resumed(tmp_path, capsys):
    from workbench import cli

    args = ["run", "grpo", "--task", "addition", "--quiet", "--out", str(tmp_path / "run"), "--set", "steps=3",
            "--set", "checkpoint_every=1", "--set", "keep_checkpoints=1", "--set", "sft_steps=0", "--set",
            "eval_size=4", "--set", "max_new_tokens=4", "--set", "prompts_per_step=2", "--set", "group_size=2"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    killed = subprocess.run([sys.executable, "-c", KILLED_AT_ROTATION, *args], capture_output=True, text=True, env=env)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert [p.name for p in kept_checkpoints(tmp_path / "run")] == ["step_000002", "step_000003"]
    assert cli.main(args) == 0, capsys.readouterr().err  # resumes at its last step: no checkpoint is written
    assert [p.name for p in kept_checkpoints(tmp_path / "run")] == ["step_000003"]


@pytest.mark.skipif(__import__("sys").platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("recipe, state_key", [("dots-rr", "replay/replayed_share"), ("pcl", "pcl/value_mse")])
def test_a_killed_data_recipe_resumes_its_sampler_and_buffer_to_the_straight_runs_rows(recipe, state_key, tmp_path):
    """A real process killed (SIGKILL) after its step-3 checkpoint and run again: the sampler's state (DOTS's
    difficulty round, PCL's value model and Adam moments) and DOTS's replay buffer come back from pipeline.pt, so every
    later row is the uninterrupted run's."""
    from tests.helpers import killed_after_checkpoint, metric_rows, small_run_args
    from workbench import cli

    def args(out):
        return small_run_args(recipe, out)

    killed_after_checkpoint(args(tmp_path / "resumed"), step=3)
    assert len(metric_rows(tmp_path / "resumed")) == 3
    assert cli.main(args(tmp_path / "resumed")) == 0 and cli.main(args(tmp_path / "straight")) == 0
    rows = metric_rows(tmp_path / "straight")
    assert metric_rows(tmp_path / "resumed") == rows and len(rows) == 6
    assert all(r[state_key] > 0 for r in rows[3:])  # the component acted after the resume
