"""`workbench compare`: recipes over seeds into one report."""
import json

import pytest

from tests.helpers import TINY
from workbench import cli
from workbench.train.compare import smoothed, steps_to_target


def test_steps_to_target_uses_a_trailing_mean():
    rows = [{"step": i, "accuracy": a} for i, a in enumerate([0.0, 1.0, 0.0, 1.0, 1.0, 1.0])]
    assert smoothed([r["accuracy"] for r in rows], 2) == [0.0, 0.5, 0.5, 0.5, 1.0, 1.0]
    assert steps_to_target(rows, 0.9, window=2) == 4
    assert steps_to_target(rows, 0.5, window=1) == 1
    assert steps_to_target(rows, 2.0) is None


def test_compare_cli_runs_recipes_over_seeds_into_one_report(tmp_path, capsys):
    sets = [f"{k}={json.dumps(v)}" for k, v in {**TINY, "steps": 2}.items() if k != "task"]
    args = ["compare", "grpo", "rloo", "--task", "addition", "--seeds", "2", "--out", str(tmp_path), "--quiet"]
    for s in sets:
        args += ["--set", s]
    assert cli.main(args) == 0
    printed = capsys.readouterr().out
    assert "grpo" in printed and "rloo" in printed and "compare.html" in printed
    result = json.loads((tmp_path / "compare.json").read_text())
    assert set(result["recipes"]) == {"grpo", "rloo"} and result["recipes"]["grpo"]["seeds"] == 2
    for name in ("grpo-s0", "grpo-s1", "rloo-s0", "rloo-s1"):
        assert (tmp_path / name / "metrics.jsonl").exists()
    html = (tmp_path / "compare.html").read_text()
    assert "steps to sampled acc." in html and "plotly" in html
    # seeds differ, recipes share the seeds' prompts: seed 0 of both recipes sees the same first batch
    first = [json.loads((tmp_path / n / "metrics.jsonl").read_text().splitlines()[0]) for n in ("grpo-s0", "rloo-s0")]
    assert first[0]["reward/mean"] == first[1]["reward/mean"]


def test_compare_rejects_bad_input():
    with pytest.raises(ValueError, match="seeds"):
        from workbench.train.compare import compare

        compare(["grpo"], task="addition", seeds=0, out="/tmp/never")


def test_compare_preference_recipes(tmp_path):
    from workbench.train.compare import compare

    sets = ["steps=2", "pairs=16", "prompts_per_step=8", "sft_steps=0", "eval_size=8", "max_new_tokens=5"]
    result = compare(["dpo", "ipo", "simpo"], task="addition", seeds=1, out=tmp_path, sets=sets, progress=False)
    assert set(result["recipes"]) == {"dpo", "ipo", "simpo"}
    assert (tmp_path / "compare.html").exists()
