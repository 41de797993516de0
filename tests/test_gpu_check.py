"""bench/gpu_check.py without a GPU: its CPU path end to end with tiny settings (the printed memory, step-time and
tokens/s lines), and the clear refusal (exit 2) of --device cuda where torch sees no CUDA device."""
import importlib.util
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest
import torch

from workbench import models

SCRIPT = Path(__file__).resolve().parent.parent / "bench" / "gpu_check.py"
TINY = ["--device", "cpu", "--steps", "1", "--prompts", "2", "--group", "2", "--new-tokens", "4", "--sft-steps", "0"]


@pytest.fixture
def gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def assert_reports(out: str) -> None:
    assert "(a) full preset's code path: qwen-0.5b-random" in out and "bf16, engine hf, chat template off" in out
    assert "2 prompts x G=2 = 4 completions, 4 new tokens" in out
    assert out.count("peak RSS") == 2  # memory, once per part
    assert out.count("step time ") == 2 and out.count("tokens/s: rollout ") == 2
    assert "generated tokens/step " in out
    assert "greedy accuracy " in out and "CPU band (0.360 -> 0.445 on the development machine" in out
    assert "band check: SKIPPED" in out  # a shortened smoke run is not compared with the band


def test_cpu_path_end_to_end_prints_memory_time_and_throughput(gpu_check, monkeypatch, tmp_path, capsys):
    """In process, with the 0.5B model cut to 2 layers and a 1024-row vocabulary (the same builder and load_model
    path; the full shape takes ~35 s on this CPU: the slow test below runs it)."""
    monkeypatch.setitem(models.IN_CODE_MODELS, "qwen-0.5b-random",
                        partial(models.build_qwen_random, num_hidden_layers=2, vocab_size=1024))
    assert gpu_check.main([*TINY, "--out", str(tmp_path)]) == 0
    assert_reports(capsys.readouterr().out)
    full = [p for p in tmp_path.iterdir() if p.name.startswith("full-")]
    smoke = [p for p in tmp_path.iterdir() if p.name.startswith("smoke-")]
    assert len(full) == len(smoke) == 1
    assert len((full[0] / "metrics.jsonl").read_text().splitlines()) == 1
    assert (smoke[0] / "summary.json").exists()
    assert gpu_check.main([*TINY, "--part", "full", "--out", str(tmp_path)]) == 0  # a rerun starts (a) over
    assert len((full[0] / "metrics.jsonl").read_text().splitlines()) == 1


def test_cuda_without_a_cuda_device_exits_2_before_anything_runs(gpu_check, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(gpu_check, "check_full", lambda args: pytest.fail("ran without CUDA"))
    assert gpu_check.main(["--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "--device cuda but no CUDA device is available" in err and "--device cpu" in err
    assert not (tmp_path / "out").exists()


def test_recipes_part_runs_the_recipe_tests_on_the_device(gpu_check, monkeypatch):
    """(c) hands the device to the tests' --device option; "all" runs it only off the CPU (on the CPU they are
    make test's own)."""
    calls = []
    monkeypatch.setattr(gpu_check.subprocess, "run", lambda cmd, cwd: calls.append(cmd) or
                        subprocess.CompletedProcess(cmd, 1))
    assert gpu_check.main(["--device", "cpu", "--part", "recipes", "--workers", "3"]) == 1  # a failed test: exit 1
    cmd = calls[0]
    assert cmd[cmd.index("--device") + 1] == "cpu" and cmd[cmd.index("-n") + 1] == "3"
    assert "every_recipe or every_preference" in cmd and "tests/train/test_pipeline.py" in cmd
    monkeypatch.setattr(gpu_check, "check_full", lambda args: None)
    monkeypatch.setattr(gpu_check, "check_smoke", lambda args: True)
    assert gpu_check.main(["--device", "cpu"]) == 0 and len(calls) == 1  # "all" on the CPU: not again
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: "a GPU")
    assert gpu_check.main([]) == 1 and calls[-1][calls[-1].index("--device") + 1] == "cuda"


def test_band_is_the_measured_cpu_runs_widened_by_the_tolerance(gpu_check):
    assert gpu_check.BAND[0] == pytest.approx((0.29, 0.41)) and gpu_check.BAND[1] == pytest.approx((0.37, 0.495))


@pytest.mark.slow
def test_script_runs_the_full_24_layer_model_on_cpu(tmp_path):
    """The command line as a user types it, the real 0.5B shape (~35 s, 5.5 GB of RAM on this 2-core CPU)."""
    proc = subprocess.run([sys.executable, str(SCRIPT), *TINY, "--out", str(tmp_path)], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert_reports(proc.stdout)
    assert "generated tokens/step 16" in proc.stdout  # random weights, 151936 ids: no EOS, all 4 x 4 tokens
