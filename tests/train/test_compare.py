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


def test_per_recipe_sets_apply_to_that_recipe_only(tmp_path):
    from workbench.train.compare import compare

    sets = [f"{k}={json.dumps(v)}" for k, v in {**TINY, "steps": 1}.items() if k != "task"]
    result = compare(["grpo", "rloo"], task="addition", seeds=1, out=tmp_path, sets=sets, progress=False,
                     recipe_sets={"rloo": ["lr=0.002", "eval_size=8"]})  # after `sets`: eval_size 16 -> 8
    assert set(result["recipes"]) == {"grpo", "rloo"}
    grpo, rloo = (json.loads((tmp_path / f"{r}-s0" / "config.json").read_text()) for r in ("grpo", "rloo"))
    assert {k for k in grpo if grpo[k] != rloo[k]} == {"recipe", "lr", "eval_size"}
    assert (grpo["lr"], rloo["lr"], grpo["eval_size"], rloo["eval_size"]) == (TINY["lr"], 0.002, 16, 8)


@pytest.mark.parametrize("recipe_sets, message", [
    ({"ppo": ["lr=0.002"]}, r"recipe_sets names \['ppo'\], which are not among the compared recipes"),
    ({"rloo": "lr=0.002"}, r"recipe_sets\['rloo'\] must be a list of key=value strings"),
    ({"rloo": ["lr=-1"]}, "config field lr"),
])
def test_bad_per_recipe_sets_are_refused_before_any_run(tmp_path, recipe_sets, message):
    from workbench.train.compare import compare
    from workbench.train.config import ConfigError

    sets = [f"{k}={json.dumps(v)}" for k, v in {**TINY, "steps": 1}.items() if k != "task"]
    with pytest.raises((ValueError, ConfigError), match=message):
        compare(["grpo", "rloo"], task="addition", seeds=1, out=tmp_path, sets=sets, progress=False,
                recipe_sets=recipe_sets)
    assert not (tmp_path / "grpo-s0").exists()  # nothing trained, no folder claimed


def test_compare_reports_pass_at_k_when_the_runs_measure_it(tmp_path, capsys):
    sets = [f"{k}={json.dumps(v)}" for k, v in {**TINY, "steps": 2, "eval_size": 6}.items() if k != "task"]
    args = ["compare", "grpo", "--task", "addition", "--seeds", "2", "--out", str(tmp_path), "--quiet",
            "--set", "pass_k=2", "--set", "pass_samples=4"]
    for s in sets:
        args += ["--set", s]
    assert cli.main(args) == 0
    row = json.loads((tmp_path / "compare.json").read_text())["recipes"]["grpo"]
    after = [json.loads((tmp_path / f"grpo-s{seed}" / "summary.json").read_text())["pass@k_after"] for seed in (0, 1)]
    assert row["pass_k"] == 2 and row["pass@k_after"] == pytest.approx(sum(after) / 2)
    assert "pass@2" in capsys.readouterr().out and "pass@k after" in (tmp_path / "compare.html").read_text()
