"""`workbench run` as a process: killed at random moments, interrupted by Ctrl-C / SIGTERM, started twice on one
folder, resumed over a corrupted file. Real subprocesses, real signals; the metrics a resumed run ends with are
those of an uninterrupted run."""
import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest
import torch

from workbench.train.checkpoint import kept_checkpoints

STEPS = 12
ARGS = ["run", "grpo", "--task", "addition", "--quiet", "--set", f"steps={STEPS}", "--set", "prompts_per_step=4",
        "--set", "group_size=4", "--set", "max_new_tokens=6", "--set", "sft_steps=0", "--set", "eval_size=16",
        "--set", "checkpoint_every=2", "--set", "minibatches=2", "--set", "lr=1e-3"]
pytestmark = [pytest.mark.slow, pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and flock")]


def start(out, *extra):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "workbench.cli", *ARGS, "--out", str(out), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=default_sigint)


def default_sigint():
    """A shell's background job (nohup, &) starts with SIGINT ignored, and children inherit that; a terminal's
    Ctrl-C reaches a foreground run, which is what these tests play."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def finish(out, *extra):
    proc = start(out, *extra)
    stdout, stderr = proc.communicate(timeout=300)
    return proc.returncode, stdout, stderr


def rows(out):
    """Logged rows without wall-clock fields, as a resumed run must reproduce them."""
    lines = (out / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if not k.startswith(("time/", "tokens_per_s/"))}
            for line in lines]


def wait_for_rows(out, n, proc, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        path = out / "metrics.jsonl"
        if path.exists() and len(path.read_text().splitlines()) >= n:
            return
        if proc.poll() is not None:
            raise AssertionError(f"the run ended (rc {proc.returncode}) before logging {n} rows: {proc.stderr.read()}")
        time.sleep(0.05)
    raise AssertionError(f"no {n} rows after {timeout} s")


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    out = tmp_path_factory.mktemp("straight") / "run"
    rc, _, stderr = finish(out)
    assert rc == 0, stderr
    return out


def final_weights(out):
    return torch.load(kept_checkpoints(out)[-1] / "state.pt", weights_only=False)["model"]


def same_run(out, straight):
    assert rows(out) == rows(straight)
    mine, theirs = final_weights(out), final_weights(straight)
    assert all(torch.equal(mine[k], theirs[k]) for k in theirs)


def test_killed_twice_at_random_moments_then_resumed_gives_the_uninterrupted_run(tmp_path, straight):
    out, rng = tmp_path / "run", random.Random(0)
    for low, high in ((1, 5), (6, 10)):  # SIGKILL: no handler runs; whatever was being written is cut
        proc = start(out)
        wait_for_rows(out, rng.randrange(low, high), proc)
        time.sleep(rng.uniform(0, 0.4))
        proc.kill()
        proc.wait()
    rc, _, stderr = finish(out)
    assert rc == 0, stderr
    same_run(out, straight)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_and_sigterm_end_cleanly_with_the_resume_hint(tmp_path, straight, sig):
    out = tmp_path / "run"
    proc = start(out)
    wait_for_rows(out, 5, proc)
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "Traceback" not in stderr
    assert "run the same command to resume" in stderr and "interrupted at step" in stderr
    rc, _, stderr = finish(out)
    assert rc == 0, stderr
    same_run(out, straight)


def test_a_second_process_on_the_same_folder_is_refused_and_the_first_is_untouched(tmp_path, straight):
    out = tmp_path / "run"
    first = start(out)
    wait_for_rows(out, 2, first)
    first.send_signal(signal.SIGSTOP)  # paused mid-run (alive, holding the folder) while the second one starts
    try:
        rc, _, stderr = finish(out)
    finally:
        first.send_signal(signal.SIGCONT)
    assert rc == 2 and f"is in use by process {first.pid}" in stderr
    assert first.wait(timeout=300) == 0
    same_run(out, straight)  # one writer: 12 rows, each step once


def test_a_damaged_checkpoint_and_a_torn_metrics_line_resume_from_the_previous_checkpoint(tmp_path, straight):
    out = tmp_path / "run"
    proc = start(out)
    wait_for_rows(out, 7, proc)
    proc.kill()
    proc.wait()
    newest = kept_checkpoints(out)[-1] / "state.pt"
    newest.write_bytes(newest.read_bytes()[: len(newest.read_bytes()) // 2])
    with open(out / "metrics.jsonl", "a") as f:
        f.write('{"step": 99, "rew')  # an append cut by the kill
    rc, _, stderr = finish(out)
    assert rc == 0, stderr
    assert "is damaged" in stderr and "falling back to the previous kept checkpoint" in stderr
    assert "torn last line" in stderr
    same_run(out, straight)


def test_a_bad_line_inside_the_metrics_is_refused_with_its_number_and_nothing_is_lost(tmp_path):
    out = tmp_path / "run"
    rc, _, stderr = finish(out, "--set", "steps=6")
    assert rc == 0, stderr
    lines = (out / "metrics.jsonl").read_text().splitlines(keepends=True)
    lines[2] = lines[2][:20] + "\n"
    (out / "metrics.jsonl").write_text("".join(lines))
    before = (out / "metrics.jsonl").read_text()
    rc, _, stderr = finish(out, "--set", "steps=6")
    assert rc == 2 and "metrics.jsonl:3: not a metrics row" in stderr and "Traceback" not in stderr
    assert (out / "metrics.jsonl").read_text() == before
