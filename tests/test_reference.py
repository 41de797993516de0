"""Reference runs: trained through compare, stored as JSONL with their provenance, and read back for the plots."""
import json

import pytest

from tests.helpers import TINY
from workbench import reference

TINY_SETS = tuple(f"{k}={json.dumps(v)}" for k, v in {**TINY, "steps": 3, "checkpoint_every": 3}.items()
                  if k != "task")


def test_a_reference_comparison_is_stored_with_provenance_and_read_back(tmp_path, monkeypatch):
    spec = reference.Reference(recipes=("grpo", "rloo"), task="addition", seeds=2, sets=TINY_SETS, every=2)
    monkeypatch.setitem(reference.REFERENCES, "tiny", spec)
    path = reference.run("tiny", runs_root=tmp_path / "runs", data_dir=tmp_path / "data", progress=False)
    meta, groups, summaries = reference.load("tiny", data_dir=tmp_path / "data")
    assert path == tmp_path / "data" / "tiny.jsonl"
    assert meta["command"] == "python -m workbench.reference tiny" and meta["commit"] and "cores" in meta["machine"]
    assert meta["recipes"] == ["grpo", "rloo"] and meta["seeds"] == 2
    assert set(groups) == {"grpo", "rloo"} and all(len(seeds) == 2 for seeds in groups.values())
    assert [r["step"] for r in groups["grpo"][0]] == [0, 2]  # every 2nd step, and the last (2)
    assert {"accuracy", "reward/mean", "entropy"} <= set(groups["rloo"][1][0])
    summary = json.loads((tmp_path / "runs" / "tiny" / "rloo-s1" / "summary.json").read_text())
    stored = next(s for s in summaries if s["recipe"] == "rloo" and s["seed"] == 1)
    assert stored["accuracy_after"] == summary["accuracy_after"]
    assert reference.load("missing", data_dir=tmp_path / "data") is None


def test_an_unknown_comparison_is_refused_before_training(tmp_path):
    with pytest.raises(ValueError, match="no reference comparison 'nope'; choose from"):
        reference.run("nope", runs_root=tmp_path, data_dir=tmp_path)
    assert reference.main(["nope"]) == 2
