"""Stored runs: trained through compare, stored as JSONL with their provenance, and read back for the plots."""
import json

import pytest

from tests.helpers import PREF, TINY
from workbench.results import stored_runs

TINY_SETS = tuple(f"{k}={json.dumps(v)}" for k, v in {**TINY, "steps": 3, "checkpoint_every": 3}.items()
                  if k != "task")


def test_a_comparison_is_stored_with_provenance_and_read_back(tmp_path, monkeypatch):
    spec = stored_runs.Comparison(recipes=("grpo", "rloo"), task="addition", seeds=2, sets=TINY_SETS, every=2)
    monkeypatch.setitem(stored_runs.COMPARISONS, "tiny", spec)
    path = stored_runs.run("tiny", runs_root=tmp_path / "runs", data_dir=tmp_path / "data", progress=False)
    meta, groups, summaries = stored_runs.load("tiny", data_dir=tmp_path / "data")
    assert path == tmp_path / "data" / "tiny.jsonl"
    assert meta["command"] == "python -m workbench.results.stored_runs tiny"
    assert meta["commit"] and "cores" in meta["machine"]
    assert meta["recipes"] == ["grpo", "rloo"] and meta["seeds"] == 2
    assert set(groups) == {"grpo", "rloo"} and all(len(seeds) == 2 for seeds in groups.values())
    assert [r["step"] for r in groups["grpo"][0]] == [0, 2]  # every 2nd step, and the last (2)
    assert {"accuracy", "reward/mean", "entropy", "rollouts", "time/step"} <= set(groups["rloo"][1][0])
    per_step = [r["rollouts"] for r in groups["grpo"][0]]  # every step of these runs samples the same rows
    assert [r["rollouts/total"] for r in groups["grpo"][0]] == [per_step[0], 3 * per_step[0]]  # steps 0..0, 0..2
    summary = json.loads((tmp_path / "runs" / "tiny" / "rloo-s1" / "summary.json").read_text())
    stored = next(s for s in summaries if s["recipe"] == "rloo" and s["seed"] == 1)
    assert stored["accuracy_after"] == summary["accuracy_after"]
    assert stored_runs.load("missing", data_dir=tmp_path / "data") is None


def test_a_preference_comparison_stores_preference_accuracies_and_per_recipe_sets(tmp_path, monkeypatch):
    sets = tuple(f"{k}={json.dumps(v)}" for k, v in {**PREF, "steps": 2, "sft_steps": 0, "eval_size": 8,
                                                       "checkpoint_every": 2}.items() if k != "task")
    spec = stored_runs.Comparison(recipes=("dpo", "ipo"), task="addition", seeds=1, sets=sets, every=1,
                                  recipe_sets={"ipo": ("lr=0.0005",)})
    monkeypatch.setitem(stored_runs.COMPARISONS, "tiny-pref", spec)
    stored_runs.run("tiny-pref", runs_root=tmp_path / "runs", data_dir=tmp_path / "data", progress=False)
    meta, groups, summaries = stored_runs.load("tiny-pref", data_dir=tmp_path / "data")
    assert meta["recipe_sets"] == {"ipo": ["lr=0.0005"]}
    for recipe, lr in (("dpo", PREF["lr"]), ("ipo", 0.0005)):
        folder = tmp_path / "runs" / "tiny-pref" / f"{recipe}-s0"
        assert json.loads((folder / "config.json").read_text())["lr"] == lr
        summary = json.loads((folder / "summary.json").read_text())
        stored = next(s for s in summaries if s["recipe"] == recipe)
        kept = [k for k in stored_runs.SUMMARY_KEPT if k in summary]  # pass@k only when the runs measure it
        assert kept and {k: stored[k] for k in kept} == {k: summary[k] for k in kept}
        assert [r["step"] for r in groups[recipe][0]] == [0, 1]
        assert {"loss/preference", "rewards/margins", "logps/chosen", "logps/rejected"} <= set(groups[recipe][0][1])


def test_an_rl_comparison_stores_no_preference_accuracies(tmp_path):
    lines = stored_runs.data_lines({}, stored_runs.Comparison(recipes=("grpo",), task="addition", seeds=1, sets=()),
                                   _one_run(tmp_path, "grpo", {"accuracy_before": 0.1, "accuracy_after": 0.2}))
    assert lines[1] == {"summary": {"recipe": "grpo", "seed": 0, "accuracy_before": 0.1, "accuracy_after": 0.2}}


def _one_run(root, recipe, summary):
    folder = root / f"{recipe}-s0"
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps(summary))
    (folder / "metrics.jsonl").write_text(json.dumps({"step": 0, "accuracy": 0.5}) + "\n")
    return root


def test_an_unknown_comparison_is_refused_before_training(tmp_path):
    with pytest.raises(ValueError, match="no stored comparison 'nope'; choose from"):
        stored_runs.run("nope", runs_root=tmp_path, data_dir=tmp_path)
    assert stored_runs.main(["nope"]) == 2


def test_every_stored_comparison_is_a_valid_plan():
    from workbench.recipes import get_recipe
    from workbench.train.config import apply_sets, make_config

    for name, spec in stored_runs.COMPARISONS.items():
        assert spec.question and spec.seeds >= 1, name
        assert set(spec.recipe_sets) <= set(spec.recipes), name
        for recipe in spec.recipes:
            get_recipe(recipe)
            apply_sets(make_config(recipe=recipe, task=spec.task), [*spec.sets, *spec.recipe_sets.get(recipe, ())])
        stored = stored_runs.load(name)
        if stored is not None:  # the data file was made by this spec
            meta, groups, summaries = stored
            assert meta["recipes"] == list(spec.recipes) and meta["sets"] == list(spec.sets), name
            assert len(summaries) == len(spec.recipes) * spec.seeds, name


def test_a_rerun_replaces_one_recipes_runs_and_records_it(tmp_path, monkeypatch):
    spec = stored_runs.Comparison(recipes=("grpo", "rloo"), task="addition", seeds=1, sets=TINY_SETS, every=2)
    monkeypatch.setitem(stored_runs.COMPARISONS, "tiny", spec)
    data = tmp_path / "data"
    stored_runs.run("tiny", runs_root=tmp_path / "runs", data_dir=data, progress=False)
    before = (data / "tiny.jsonl").read_text().splitlines()
    # the stored rloo lines are marked, so that their replacement shows; grpo's stay as they were
    marked = [line.replace('"recipe": "rloo"', '"recipe": "rloo", "old": 1') for line in before]
    (data / "tiny.jsonl").write_text("\n".join(marked) + "\n")
    stored_runs.rerun("tiny", ["rloo"], runs_root=tmp_path / "runs", data_dir=data, progress=False)
    after = (data / "tiny.jsonl").read_text().splitlines()
    of = lambda lines, recipe: [line for line in lines if f'"recipe": "{recipe}"' in line]  # noqa: E731
    assert of(after, "grpo") == of(before, "grpo")
    assert not [line for line in after if '"old"' in line]
    untimed = lambda lines: [{k: v for k, v in next(iter(json.loads(line).values())).items() if k != "time/step"}
                             for line in lines]  # noqa: E731 (wall-clock time differs from run to run)
    assert untimed(of(after, "rloo")) == untimed(of(before, "rloo"))  # trained again by the same code: the same runs
    meta, groups, _ = stored_runs.load("tiny", data_dir=data)
    assert meta["recipes"] == ["grpo", "rloo"]
    (record,) = meta["reruns"]
    assert record["recipes"] == ["rloo"] and record["command"].endswith("tiny --recipes rloo") and record["commit"]
    assert list(groups) == ["grpo", "rloo"]
    # stored runs from another warm start (the accuracy before training differs): the splice is refused
    text = (data / "tiny.jsonl").read_text()
    grpo = next(json.loads(line) for line in text.splitlines() if '"summary": {"recipe": "grpo"' in line)
    old = json.dumps(grpo)
    grpo["summary"]["accuracy_before"] += 0.25
    (data / "tiny.jsonl").write_text(text.replace(old, json.dumps(grpo)))
    tampered = (data / "tiny.jsonl").read_text()
    with pytest.raises(ValueError, match=r"starts from another warm start .* re-run the whole comparison"):
        stored_runs.rerun("tiny", ["rloo"], runs_root=tmp_path / "runs", data_dir=data, progress=False)
    assert (data / "tiny.jsonl").read_text() == tampered


def test_a_rerun_is_refused_before_training_when_it_cannot_splice(tmp_path, monkeypatch):
    spec = stored_runs.Comparison(recipes=("grpo", "rloo"), task="addition", seeds=1, sets=TINY_SETS)
    monkeypatch.setitem(stored_runs.COMPARISONS, "tiny", spec)
    with pytest.raises(ValueError, match=r"has no recipes \['ppo'\]; its recipes: \['grpo', 'rloo'\]"):
        stored_runs.rerun("tiny", ["ppo"], runs_root=tmp_path, data_dir=tmp_path)
    with pytest.raises(ValueError, match="does not exist: run the whole comparison first"):
        stored_runs.rerun("tiny", ["rloo"], runs_root=tmp_path, data_dir=tmp_path)
    (tmp_path / "tiny.jsonl").write_text(json.dumps({"meta": {"task": "addition", "seeds": 2}}) + "\n")
    with pytest.raises(ValueError, match="has changed since .* was stored"):
        stored_runs.rerun("tiny", ["rloo"], runs_root=tmp_path, data_dir=tmp_path)
    assert not list(tmp_path.glob("tiny@*"))  # nothing trained
    assert stored_runs.main(["a", "b", "--recipes", "grpo"]) == 2


def test_made_by_names_the_command_commit_and_every_rerun():
    meta = {"command": "python -m workbench.results.stored_runs f2", "commit": "abc", "date": "2026-11-26",
            "machine": "2 cores", "seeds": 3, "sets": ["lr=3e-4", "steps=80"]}
    assert stored_runs.made_by(meta) == ("python -m workbench.results.stored_runs f2  (commit abc, 2026-11-26, "
                                         "2 cores; 3 seeds, lr=3e-4 steps=80)")
    meta["reruns"] = [{"recipes": ["hapo"], "command": "python -m workbench.results.stored_runs f2 --recipes hapo",
                       "commit": "def", "date": "2026-11-29", "machine": "2 cores"}]
    assert stored_runs.made_by(meta).splitlines()[1] == ("  re-run hapo: python -m workbench.results.stored_runs f2 "
                                                         "--recipes hapo  (commit def, 2026-11-29, 2 cores)")


def test_a_recipe_added_to_a_stored_comparison_joins_it_by_a_rerun(tmp_path, monkeypatch):
    monkeypatch.setitem(stored_runs.COMPARISONS, "tiny", stored_runs.Comparison(
        recipes=("grpo",), task="addition", seeds=1, sets=TINY_SETS, every=2))
    data = tmp_path / "data"
    stored_runs.run("tiny", runs_root=tmp_path / "runs", data_dir=data, progress=False)
    monkeypatch.setitem(stored_runs.COMPARISONS, "tiny", stored_runs.Comparison(
        recipes=("grpo", "rloo"), task="addition", seeds=1, sets=TINY_SETS, every=2))
    stored_runs.rerun("tiny", ["rloo"], runs_root=tmp_path / "runs", data_dir=data, progress=False)
    meta, groups, summaries = stored_runs.load("tiny", data_dir=data)
    assert meta["recipes"] == ["grpo", "rloo"] and list(groups) == ["grpo", "rloo"] and len(summaries) == 2
    assert meta["reruns"][0]["recipes"] == ["rloo"]
