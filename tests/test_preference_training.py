"""The preference loop end to end on the tiny model: offline, online, resume, JSONL data, errors."""
import json

import pytest

from tests.helpers import resumes_exactly
from workbench.recipes import PreferenceRecipe, RECIPES
from workbench.tasks import get_task
from workbench.tasks.preferences import corrupt, read_pairs, task_lists, task_pairs, write_pairs
from workbench.train import make_config, make_trainer, train
from workbench.train.metrics import GLOSSARY, read_rows

PREF = dict(task="addition", steps=4, prompts_per_step=8, pairs=32, sft_steps=20, eval_size=16,
            checkpoint_every=2, lr=1e-3, max_new_tokens=5)
TRL_NAMES = {"rewards/chosen", "rewards/rejected", "rewards/margins", "rewards/accuracies", "logps/chosen",
             "logps/rejected"}


def test_task_pairs_are_verified_and_never_use_held_out_prompts():
    task = get_task("addition")
    held_out = {e.prompt for e in task.eval_set()}
    pairs = task_pairs(task, 50, seed=1)
    assert len(pairs) == 50 and not {p.prompt for p in pairs} & held_out
    for p in pairs:  # chosen is the verified sum, rejected a wrong one
        a, b = p.prompt.rstrip("=").split("+")
        assert p.chosen == str(int(a) + int(b)) != p.rejected
    lists = task_lists(get_task("countdown"), 5, 4)
    assert all(len(responses) == 4 and len(set(responses)) == 4 for _, responses in lists)


def test_jsonl_round_trip_and_bad_files(tmp_path):
    pairs = task_pairs(get_task("addition"), 3)
    write_pairs(pairs, tmp_path / "p.jsonl")
    assert read_pairs(tmp_path / "p.jsonl") == pairs
    (tmp_path / "bad.jsonl").write_text(json.dumps({"prompt": "1+1=", "chosen": "2"}) + "\n")
    with pytest.raises(ValueError, match="missing fields \\['rejected'\\]"):
        read_pairs(tmp_path / "bad.jsonl")
    (tmp_path / "empty.jsonl").write_text(json.dumps({"prompt": "1+1=", "chosen": "", "rejected": "3"}) + "\n")
    with pytest.raises(ValueError, match="empty response"):
        read_pairs(tmp_path / "empty.jsonl")


def test_corruption_changes_exactly_one_digit():
    import random

    rng = random.Random(0)
    for answer in ("46", "100", "3*5+7"):
        wrong = corrupt(answer, rng)
        assert len(wrong) == len(answer) and sum(a != b for a, b in zip(answer, wrong)) == 1


@pytest.mark.covers("dpo")
def test_offline_dpo_run_logs_trl_metrics_and_resumes_exactly(tmp_path):
    config = make_config("smoke", recipe="dpo", **PREF)
    summary = train(config, tmp_path / "straight", progress=False)
    rows = read_rows(tmp_path / "straight" / "metrics.jsonl")
    assert [r["step"] for r in rows] == [0, 1, 2, 3] and TRL_NAMES <= set(rows[0])
    assert set().union(*rows) <= set(GLOSSARY)
    assert (tmp_path / "straight" / "ref_logps.pt").exists() and (tmp_path / "straight" / "report.html").exists()
    assert {"preference_accuracy_before", "preference_accuracy_after", "accuracy_before"} <= set(summary)
    assert rows[-1]["rewards/margins"] > rows[0]["rewards/margins"]  # DPO widens the margin on its data
    assert resumes_exactly(config, tmp_path / "again")


@pytest.mark.parametrize("recipe", sorted(k for k, r in RECIPES.items() if isinstance(r, PreferenceRecipe)))
def test_every_preference_recipe_trains(recipe, tmp_path):
    train(make_config("smoke", recipe=recipe, **{**PREF, "steps": 2}), tmp_path, progress=False, report=False)
    rows = read_rows(tmp_path / "metrics.jsonl")
    assert len(rows) == 2 and all(r.get("grad_norm", 1) >= 0 for r in rows)
    assert set().union(*rows) <= set(GLOSSARY), set().union(*rows) - set(GLOSSARY)


def test_preference_run_from_a_local_jsonl(tmp_path):
    write_pairs(task_pairs(get_task("addition"), 16, seed=3), tmp_path / "pairs.jsonl")
    config = make_config("smoke", recipe="dpo", **{**PREF, "steps": 2, "data_path": str(tmp_path / "pairs.jsonl")})
    train(config, tmp_path / "run", progress=False, report=False)
    assert len(read_rows(tmp_path / "run" / "metrics.jsonl")) == 2


@pytest.mark.covers("sppo", "online-dpo")
def test_iterative_sppo_moves_its_reference_and_resumes_exactly(tmp_path):
    import torch

    config = make_config("smoke", recipe="sppo", **{**PREF, "steps": 6, "sft_steps": 60, "group_size": 6,
                                                    "checkpoint_every": 3})
    trainer = make_trainer(config, tmp_path / "straight", progress=False)
    trainer.run()
    rows = read_rows(tmp_path / "straight" / "metrics.jsonl")
    assert sum(r["pairs"] for r in rows) > 0  # the verifier separated some of the policy's own samples
    # the reference moved with the iterations: it is no longer the warm start a fresh set-up builds
    after_4 = make_trainer(config, tmp_path / "straight", progress=False)
    assert not all(torch.equal(a, b) for a, b in zip(trainer.ref.parameters(), after_4.setup().ref.parameters()))
    assert resumes_exactly(config, tmp_path / "again", stop_after_step=3)


def test_win_rate_from_verifier_scores():
    from workbench.tasks.base import Example
    from workbench.train.preference import win_rate

    task = get_task("addition")
    example = Example("1+1=", "2", "2")
    assert win_rate(task, example, "2", ["2", "3", "4", "2"]) == pytest.approx((0.5 + 1 + 1 + 0.5) / 4)
    assert win_rate(task, example, "5", ["2", "3"]) == pytest.approx(0.25)


def test_pairs_from_samples_never_prefer_a_shorter_wrong_answer():
    from workbench.tasks.base import Example
    from workbench.tasks.preferences import pair_from

    task = get_task("countdown")
    example = Example("3 5 7>22:", "22|3 5 7", "3*5+7")
    assert pair_from(task, example, ["3+5", "3+5+7+1"]) is None            # both wrong: no pair
    assert pair_from(task, example, ["3*5+7", "(3*5)+7"]) == \
        __import__("workbench.tasks.preferences", fromlist=["x"]).PreferencePair("3 5 7>22:", "3*5+7", "(3*5)+7")
    assert pair_from(task, example, ["3+5", "3*5+7"]).chosen == "3*5+7"   # correct beats wrong


def test_pairs_from_a_reward_function():
    from workbench.tasks.preferences import reward_pairs

    def brevity(completions, prompts):  # TRL-style reward: shorter is better
        return [-float(len(c)) for c in completions]

    pairs = reward_pairs(["a", "b"], [["xx", "x", "xxx"], ["y", "z"]], brevity)
    assert [(p.chosen, p.rejected) for p in pairs] == [("x", "xxx")]  # "y"/"z" tie: no pair
    with pytest.raises(ValueError, match="returned"):
        reward_pairs(["a"], [["x", "y"]], lambda completions, prompts: [float("nan"), 0.0])


def test_a_recipe_needing_rewards_rejects_jsonl_pairs_clearly(tmp_path):
    write_pairs(task_pairs(get_task("addition"), 8), tmp_path / "pairs.jsonl")
    config = make_config("smoke", recipe="refuel", **{**PREF, "steps": 1, "data_path": str(tmp_path / "pairs.jsonl")})
    with pytest.raises(ValueError, match="needs per-item inputs"):
        train(config, tmp_path / "run", progress=False, report=False)


@pytest.mark.covers("lipo")
def test_listwise_recipe_caches_k_reference_logps_per_list(tmp_path):
    import torch

    config = make_config("smoke", recipe="lipo", **{**PREF, "steps": 2})
    trainer = make_trainer(config, tmp_path, progress=False)
    trainer.run()
    cached = torch.load(tmp_path / "ref_logps.pt")
    assert cached.shape == (PREF["pairs"], 4)
    assert read_rows(tmp_path / "metrics.jsonl")[0]["lipo/pairs_per_list"] > 0
