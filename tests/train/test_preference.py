"""The preference loop end to end on the tiny model: offline, online, resume, JSONL data, LoRA reference, errors."""
import json

import pytest
import torch

from tests.helpers import resumes_exactly
from workbench.models import build_tiny, load_model
from workbench.recipes import RECIPES, PreferenceRecipe
from workbench.rollout.engine import encode_responses
from workbench.tasks import get_task
from workbench.tasks.preferences import task_pairs, write_pairs
from workbench.train import make_config, make_trainer, train
from workbench.train.glossary import unexplained
from workbench.train.metrics import read_rows
from workbench.train.preference import list_logps

PREF = dict(task="addition", steps=4, prompts_per_step=8, pairs=32, sft_steps=20, eval_size=16,
            checkpoint_every=2, lr=1e-3, max_new_tokens=5)
TRL_NAMES = {"rewards/chosen", "rewards/rejected", "rewards/margins", "rewards/accuracies", "logps/chosen",
             "logps/rejected"}


@pytest.mark.covers("dpo")
def test_offline_dpo_run_logs_trl_metrics_and_resumes_exactly(tmp_path):
    config = make_config("smoke", recipe="dpo", **PREF)
    summary = train(config, tmp_path / "straight", progress=False)
    rows = read_rows(tmp_path / "straight" / "metrics.jsonl")
    assert [r["step"] for r in rows] == [0, 1, 2, 3] and TRL_NAMES <= set(rows[0])
    assert not unexplained(set().union(*rows)), unexplained(set().union(*rows))
    assert (tmp_path / "straight" / "ref_logps.pt").exists() and (tmp_path / "straight" / "report.html").exists()
    assert {"preference_accuracy_before", "preference_accuracy_after", "accuracy_before"} <= set(summary)
    assert rows[-1]["rewards/margins"] > rows[0]["rewards/margins"]  # DPO widens the margin on its data
    assert resumes_exactly(config, tmp_path / "again")


@pytest.mark.parametrize("recipe", sorted(k for k, r in RECIPES.items() if isinstance(r, PreferenceRecipe)))
def test_every_preference_recipe_trains(recipe, tmp_path):
    train(make_config("smoke", recipe=recipe, **{**PREF, "steps": 2}), tmp_path, progress=False, report=False)
    rows = read_rows(tmp_path / "metrics.jsonl")
    assert len(rows) == 2 and all(r.get("grad_norm", 1) >= 0 for r in rows)
    assert not unexplained(set().union(*rows)), unexplained(set().union(*rows))


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


def test_lora_dpo_uses_the_adapter_disabled_base_as_reference(tmp_path):
    from workbench.models import AdapterDisabled

    config = make_config("smoke", recipe="dpo", task="addition", steps=2, pairs=16, prompts_per_step=8, sft_steps=0,
                         eval_size=8, lr=1e-2, lora_r=4, max_new_tokens=4)
    trainer = make_trainer(config, tmp_path, progress=False)
    trainer.run()
    assert isinstance(trainer.ref, AdapterDisabled)
    plain, _ = load_model("tiny", seed=config.seed)
    items = trainer.items.select([0, 1, 2])
    assert torch.allclose(trainer.frozen_logps(trainer.ref, items), trainer.frozen_logps(plain, items), atol=1e-5)
    assert not torch.allclose(trainer.frozen_logps(trainer.model, items), trainer.frozen_logps(plain, items),
                              atol=1e-5)


def test_a_partial_step_is_scored_without_eos():
    model, tok = build_tiny(seed=0)
    full, _ = list_logps(model, tok, ["12+3="], [["15"]])
    partial, n = list_logps(model, tok, ["12+3="], [["15"]], ends=[[False]])
    eos_only, _ = list_logps(model, tok, ["12+3=15"], [[""]])
    assert n.item() == 2
    assert torch.allclose(full - partial, eos_only, atol=1e-5)  # log p(15 EOS) = log p(15) + log p(EOS | 15)
    with pytest.raises(ValueError, match="empty partial response"):
        encode_responses(tok, [""], eos=[False])


def test_a_preference_run_folder_holds_the_held_out_episodes_after_training(tmp_path):
    config = make_config("smoke", recipe="dpo", **{**PREF, "steps": 1, "sft_steps": 0})
    summary = make_trainer(config, tmp_path, progress=False).run()
    records = [json.loads(line) for line in (tmp_path / "eval_after.jsonl").read_text().splitlines()]
    assert len(records) == summary["eval_size"] == PREF["eval_size"]
    assert {"prompt", "completion", "answer", "correct"} <= set(records[0])
    assert sum(r["correct"] for r in records) / len(records) == pytest.approx(summary["accuracy_after"])


def test_loss_overrides_and_kl_coef_reach_the_preference_loss_or_are_refused(tmp_path):
    from workbench.train.preference import PreferenceTrainer

    trainer = PreferenceTrainer(make_config("smoke", recipe="dpo", **PREF, kl_coef=0.5), tmp_path)
    assert trainer.recipe.loss_kw["beta"] == 0.5  # kl_coef is the loss's beta
    trainer = PreferenceTrainer(make_config("smoke", recipe="ipo", **PREF,
                                            recipe_overrides={"loss": {"beta": 2.0}}), tmp_path)
    assert trainer.recipe.loss_kw["beta"] == 2.0
    with pytest.raises(ValueError, match=r"takes no \['bta'\]; its keywords: \['beta'"):
        PreferenceTrainer(make_config("smoke", recipe="dpo", **PREF, recipe_overrides={"loss": {"bta": 1}}), tmp_path)
    with pytest.raises(ValueError, match=r"preference recipe: recipe_overrides take only .*\['objective'\]"):
        PreferenceTrainer(make_config("smoke", recipe="dpo", **PREF, recipe_overrides={"objective": {}}), tmp_path)
    assert not (tmp_path / "config.json").exists()
