"""The trainer end to end on the tiny model, RL and preference recipes alike: run folder, determinism, exact resume,
recipes, LoRA / QLoRA, errors."""
import dataclasses
import json

import pytest
import torch

from workbench.batch import RolloutBatch

from tests.helpers import TINY, DigitFirst, metric_rows, resumes_exactly
from workbench.models import load_model
from workbench.rollout import policy_forward
from workbench.train import Trainer, make_config, train
from workbench.train.glossary import unexplained
from workbench.train.metrics import read_rows


@pytest.fixture(scope="module")
def grpo_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("grpo")
    summary = train(make_config("smoke", recipe="grpo", **TINY), out, progress=False)
    return out, summary


def test_run_folder_holds_config_metrics_summary_checkpoints_and_report(grpo_run):
    out, summary = grpo_run
    for name in ("config.json", "metrics.jsonl", "summary.json", "report.html", "eval_after.jsonl"):
        assert (out / name).exists(), name
    rows = read_rows(out / "metrics.jsonl")
    assert [r["step"] for r in rows] == [0, 1, 2, 3]
    required = {"step", "reward/mean", "accuracy", "entropy", "kl", "clip/region", "response_length/mean",
                "time/step"}
    assert required <= set(rows[0])
    assert set(json.loads((out / "summary.json").read_text())) >= {"accuracy_before", "accuracy_after"}
    assert 0 <= summary["accuracy_before"] <= 1 and 0 <= summary["accuracy_after"] <= 1
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step_000002", "step_000004"]


def test_every_logged_metric_is_in_the_glossary(grpo_run):
    rows = read_rows(grpo_run[0] / "metrics.jsonl")
    assert not unexplained(set().union(*rows)), unexplained(set().union(*rows))


def test_same_seed_gives_the_same_metrics(grpo_run, tmp_path):
    train(make_config("smoke", recipe="grpo", **TINY), tmp_path, progress=False, report=False)
    assert metric_rows(tmp_path) == metric_rows(grpo_run[0])


def test_resume_after_interruption_neither_loses_nor_repeats_steps(grpo_run, tmp_path):
    config = make_config("smoke", recipe="grpo", **TINY)

    class Interrupt(Exception):
        pass

    def crash_at_step_3(row):
        if row["step"] == 2:  # step 2 is logged, checkpoint 2 exists, step 3 never starts
            raise Interrupt

    with pytest.raises(Interrupt):
        Trainer(config, tmp_path, progress=False, callback=crash_at_step_3).run()
    assert [r["step"] for r in read_rows(tmp_path / "metrics.jsonl")] == [0, 1, 2]
    train(config, tmp_path, progress=False, report=False)  # resumes from checkpoint 2, recomputes step 2
    assert metric_rows(tmp_path) == metric_rows(grpo_run[0])


def test_a_different_config_never_overwrites_an_existing_run(grpo_run):
    out, _ = grpo_run
    before = (out / "metrics.jsonl").read_text()
    with pytest.raises(ValueError, match="different config"):
        train(make_config("smoke", recipe="grpo", **{**TINY, "lr": 0.5}), out, progress=False)
    assert (out / "metrics.jsonl").read_text() == before


@pytest.mark.covers("entropy-bonus", "kl-penalty")
@pytest.mark.parametrize("overrides", [{"entropy_coef": 0.01}, {"kl_coef": 0.0}, {"ppo_epochs": 2}])
def test_loss_terms_and_epochs_switch_on_from_the_config(overrides, tmp_path):
    config = make_config("smoke", recipe="grpo", **{**TINY, "steps": 2, **overrides})
    trainer = Trainer(config, tmp_path, progress=False)
    trainer.task = DigitFirst()
    trainer.run()
    rows = read_rows(tmp_path / "metrics.jsonl")
    assert len(rows) == 2 and all(r["grad_norm"] >= 0 for r in rows) and any(r["grad_norm"] > 0 for r in rows)
    assert not unexplained(set().union(*rows)), unexplained(set().union(*rows))
    if "ppo_epochs" in overrides:  # later minibatches/epochs see r != 1
        assert any(r["clip/out_of_band"] > 0 or r["kl/k3_old"] > 0 for r in rows)


def test_rl_raises_the_reward_from_scratch(tmp_path):
    """Sanity of the whole loop: 25 GRPO steps on an untrained model lift the sampled reward."""
    config = make_config("smoke", recipe="grpo", steps=25, prompts_per_step=8, group_size=8, max_new_tokens=3,
                         sft_steps=0, eval_size=10, checkpoint_every=25, lr=3e-3, minibatches=1)
    trainer = Trainer(config, tmp_path, progress=False)
    trainer.task = DigitFirst()
    trainer.run()
    rows = read_rows(tmp_path / "metrics.jsonl")
    early = sum(r["reward/mean"] for r in rows[:5]) / 5
    late = sum(r["reward/mean"] for r in rows[-5:]) / 5
    assert late > early + 0.3, (early, late)


def test_lora_run_trains_only_the_adapter(tmp_path):
    config = make_config("smoke", recipe="grpo", **{**TINY, "steps": 2, "lora_r": 4})
    trainer = Trainer(config, tmp_path, progress=False)
    trainer.task = DigitFirst()  # a task an untrained model gets partly right, so gradients are non-zero
    trainer.setup()
    trainable = [n for n, p in trainer.model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.run()
    changed = {n for n, p in trainer.model.named_parameters() if not torch.equal(p, before[n])}
    assert changed and changed <= set(trainable)
    # the reference is the adapter-disabled base: no second copy, and it still gives the base model's log-probs
    base_ids = {id(p) for p in trainer.model.get_base_model().parameters()}
    assert {id(p) for p in trainer.ref.parameters()} == base_ids
    batch = trainer.make_batch(0)
    plain, _ = load_model("tiny", seed=config.seed)
    base_logp, _, _ = policy_forward(plain, batch.prompt_ids, batch.prompt_mask, batch.response_ids, batch.mask)
    policy_logp, _, _ = policy_forward(trainer.model, batch.prompt_ids, batch.prompt_mask, batch.response_ids,
                                       batch.mask)
    assert torch.allclose(batch.ref_logp, base_logp * batch.mask, atol=1e-5)
    assert not torch.allclose(batch.ref_logp, policy_logp * batch.mask, atol=1e-5)  # the adapter did move


def test_lora_checkpoints_hold_only_the_adapter_and_resume_exactly(tmp_path):
    from workbench.train.checkpoint import latest_checkpoint, load_checkpoint

    config = make_config("smoke", recipe="grpo", **{**TINY, "lora_r": 4})
    assert resumes_exactly(config, tmp_path, stop_after_step=1, task=DigitFirst())
    saved = load_checkpoint(latest_checkpoint(tmp_path / "straight"))["model"]
    assert saved and all("lora_" in name for name in saved)


@pytest.mark.covers("kl-penalty")
def test_adaptive_kl_controller_moves_beta_and_resumes_exactly(tmp_path):
    controller = ["adaptive-kl", {"target": 1e-6, "horizon": 10}, "regularizer:kl-penalty.beta"]
    overrides = {"recipe_overrides": {"controllers": [controller]}, "kl_coef": 0.1}
    config = make_config("smoke", recipe="grpo", **{**TINY, **overrides})
    assert resumes_exactly(config, tmp_path, task=DigitFirst())
    betas = [r["kl_coef"] for r in read_rows(tmp_path / "straight" / "metrics.jsonl")]
    assert betas[0] == 0.1 and betas[-1] > betas[0]  # KL above a tiny target: beta grows


def test_a_run_folder_written_before_a_config_field_existed_still_resumes(grpo_run):
    out, _ = grpo_run
    saved = json.loads((out / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({k: v for k, v in saved.items() if k != "track_kl"}))
    before = metric_rows(out)
    summary = train(make_config("smoke", recipe="grpo", **TINY), out, progress=False, report=False)
    assert metric_rows(out) == before and summary["steps"] == TINY["steps"]  # resumed the finished run, no retraining


@pytest.mark.parametrize("avx512bf16", [False, True], ids=["this-cpu", "avx512bf16-cpu"])
def test_qlora_trains_an_adapter_over_a_4bit_base_and_resumes_exactly(avx512bf16, tmp_path, monkeypatch):
    """Also on a CPU whose bitsandbytes repacks 4-bit weights for inference on the first generate (forced here,
    whatever this machine is): every step after a rollout must still move the adapter."""
    modules = pytest.importorskip("bitsandbytes.nn.modules", reason="QLoRA needs bitsandbytes (make install)")
    monkeypatch.setattr(modules, "has_avx512bf16", lambda: avx512bf16)
    config = make_config("smoke", recipe="grpo", **{**TINY, "lora_r": 4, "load_in_4bit": True})
    trainer = Trainer(config, tmp_path / "one", progress=False)
    trainer.task = DigitFirst()
    trainer.setup()
    base = trainer.model.get_base_model()
    assert type(base.model.layers[0].mlp.up_proj).__name__ == "Linear4bit"
    assert {id(p) for p in trainer.ref.parameters()} == {id(p) for p in base.parameters()}  # the 4-bit base
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    trainer.run()
    assert all(r["grad_norm"] > 0 for r in read_rows(tmp_path / "one" / "metrics.jsonl"))
    trained = {n for n, p in trainer.model.named_parameters() if p.requires_grad}
    assert trained and all("lora_" in n for n in trained)
    assert any(not torch.equal(p, before[n]) for n, p in trainer.model.named_parameters() if n in before)
    assert resumes_exactly(config, tmp_path / "resume", stop_after_step=1, task=DigitFirst())
    with pytest.raises(ValueError, match="lora_r > 0"):
        make_config("smoke", load_in_4bit=True)


def test_the_trainer_samples_and_evaluates_with_its_stop_strings(tmp_path):
    from tests.helpers import TINY

    trainer = Trainer(make_config("smoke", **{**TINY, "stop": ["=U"]}), tmp_path, progress=False).setup()
    generate, seen = trainer.engine.generate, []

    def recorded_generate(*args, **kw):
        seen.append(kw.get("stop"))
        return generate(*args, **kw)

    trainer.engine.generate = recorded_generate
    trainer.sample(trainer.context(0))
    trainer.evaluate()
    assert len(seen) == 2 and all(stop == ["=U"] for stop in seen)


def test_components_can_score_and_resample_at_another_temperature(tmp_path, monkeypatch):
    """ctx.score(batch, T) is the policy's log-probs with logits / T; ctx.rollout(..., temperature=T) samples at T."""
    trainer = Trainer(make_config("smoke", recipe="grpo", **{**TINY, "steps": 1}), tmp_path, progress=False)
    trainer.task = DigitFirst()
    trainer.setup()
    ctx = trainer.context(0)
    batch = trainer.make_batch(0)
    for temperature in (0.8, 1.0, 1.2):
        expected, _, _ = policy_forward(trainer.model, batch.prompt_ids, batch.prompt_mask, batch.response_ids,
                                        batch.mask, temperature)
        assert torch.allclose(ctx.score(batch, temperature), expected * batch.mask)
    assert not torch.allclose(ctx.score(batch, 0.8), ctx.score(batch, 1.2))
    with pytest.raises(ValueError, match="temperature must be > 0"):
        ctx.score(batch, 0.0)
    seen = []
    monkeypatch.setattr(trainer.pipeline, "rollout", lambda engine, task, examples, *, group_size, sampling, ctx:
                        seen.append(sampling.temperature) or RolloutBatch.from_rewards([0.0] * group_size))
    trainer.rollouts = 0
    ctx.rollout(ctx.examples or [trainer.task.eval_set(1)[0]], group_size=2, temperature=1.3)
    ctx.rollout([trainer.task.eval_set(1)[0]], group_size=2)
    assert seen == [1.3, trainer.config.temperature]
    assert trainer.rollouts == 4  # each call's rows are counted as the step's rollouts


@pytest.mark.covers("tis")
@pytest.mark.parametrize("recipe", ["grpo", "gspo", "cispo", "sapo"])
def test_rollout_is_weights_every_objective_as_verl_does(recipe, tmp_path):
    """--set rollout_is=MODE multiplies the objective's per-token loss by the tis weights (not the KL term): for
    ppo-clip that is exactly the `tis` objective; for the others, exactly the objective with weighted counts."""
    from workbench import ops, registry
    from workbench.objectives.tis import tis_weights

    config = make_config("smoke", recipe=recipe, **{**TINY, "steps": 1}, rollout_is="token_mask",
                         rollout_is_cap=1.1, rollout_is_low=0.9)
    trainer = Trainer(config, tmp_path / "a", progress=False)
    trainer.task = DigitFirst()
    trainer.setup()
    batch = trainer.make_batch(0)
    batch.old_logp = policy_forward(trainer.model, batch.prompt_ids, batch.prompt_mask, batch.response_ids,
                                    batch.mask)[0].detach() * batch.mask
    noise = 0.2 * torch.randn(batch.mask.shape, generator=torch.Generator().manual_seed(0))
    batch.mu_logp = (batch.old_logp + noise) * batch.mask  # a rollout engine that disagrees with the trainer
    if batch.ref_logp is not None:
        batch.ref_logp = batch.old_logp + 0.1 * batch.mask  # a reference the policy has moved from
    denom = ops.Denominators.of(batch.mask, norm_constant=batch.size * config.max_new_tokens)
    loss, metrics = trainer.minibatch_loss(batch, denom)
    w = tis_weights(batch.old_logp, batch.mu_logp, batch.mask, mode="token_mask", cap=1.1, low=0.9)
    assert 0 < metrics["rollout_is/masked_frac"] < 1 and metrics["rollout_is/mean_weight"] > 0
    logp = policy_forward(trainer.model, batch.prompt_ids, batch.prompt_mask, batch.response_ids, batch.mask)[0]
    objective = trainer.pipeline.parts["objective"][0]
    kw = {**objective.use.kw, **{k: getattr(batch, k) for k in objective.entry.reads}}
    expected, _ = objective.fn(logp, batch.old_logp, batch.advantages, batch.mask, agg=trainer.recipe.agg,
                               denom=dataclasses.replace(denom, weights=w), **kw)
    unweighted, _ = objective.fn(logp, batch.old_logp, batch.advantages, batch.mask, agg=trainer.recipe.agg,
                                 denom=denom, **kw)
    expected, unweighted, kl = expected.item(), unweighted.item(), loss.item() - metrics["loss/policy"]
    assert metrics["loss/policy"] == pytest.approx(expected, rel=1e-6)
    assert expected != pytest.approx(unweighted, rel=1e-3)
    if recipe == "grpo":
        tis, _ = registry.get("objective", "tis").fn(logp, batch.old_logp, batch.advantages, batch.mask,
                                                     mu_logp=batch.mu_logp, agg=trainer.recipe.agg, denom=denom,
                                                     mode="token_mask", cap=1.1, low=0.9)
        assert tis.item() == pytest.approx(metrics["loss/policy"], rel=1e-6)
        from workbench.regularizers.kl_penalty import kl_in_loss

        term, _ = kl_in_loss(logp, batch.ref_logp, batch.mask, beta=0.04, agg=trainer.recipe.agg, denom=denom)
        assert kl == pytest.approx(term.item(), rel=1e-5) and kl != 0  # grpo's k3 term, added unweighted


def test_rollout_is_refuses_an_objective_that_already_corrects(tmp_path):
    with pytest.raises(ValueError, match="would correct twice: objective 'minirl'"):
        Trainer(make_config("smoke", recipe="minirl", **TINY, rollout_is="token_truncate"), tmp_path, progress=False)


def test_pass_at_k_is_the_unbiased_estimator():
    from math import comb

    from workbench.train.evaluate import pass_at_k, sampled_pass_at_k

    for n in (1, 4, 8, 16):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert pass_at_k(n, c, k) == pytest.approx(1 - comb(n - c, k) / comb(n, k), abs=1e-12)
    assert pass_at_k(8, 2, 1) == pytest.approx(2 / 8)  # pass@1 is the sampled accuracy
    # by enumeration: the chance that a uniformly random k-subset of the n samples holds a correct one
    import itertools
    hits = [1, 0, 0, 1, 0, 0, 0, 0]
    subsets = list(itertools.combinations(range(8), 3))
    assert pass_at_k(8, 2, 3) == pytest.approx(sum(any(hits[i] for i in s) for s in subsets) / len(subsets))
    assert sampled_pass_at_k([0, 8, 2], 8, 4) == pytest.approx({"pass@1": (0 + 1 + 0.25) / 3,
                                                               "pass@k": (0 + 1 + pass_at_k(8, 2, 4)) / 3})
    with pytest.raises(ValueError, match="1 <= k <= n"):
        pass_at_k(4, 1, 5)


def test_pass_at_k_and_held_out_entropy_are_reported_before_after_and_on_eval_steps(tmp_path):
    config = make_config("smoke", recipe="grpo", **{**TINY, "steps": 4, "checkpoint_every": 2, "eval_size": 8},
                         pass_k=4, pass_samples=6, eval_every=2)
    trainer = Trainer(config, tmp_path / "a", progress=False)
    trainer.task = DigitFirst()
    summary = trainer.run()
    assert summary["pass_k"] == 4 and summary["pass_samples"] == 6
    for when in ("before", "after"):
        p1, pk, h = summary[f"pass@1_{when}"], summary[f"pass@k_{when}"], summary[f"entropy_{when}"]
        assert 0 <= p1 <= pk <= 1 and h > 0  # pass@k >= pass@1 for every prompt
    rows = read_rows(tmp_path / "a" / "metrics.jsonl")
    assert [r.get("eval/pass@k") is not None for r in rows] == [False, True, False, True]
    # the held-out draw is fixed: the same policy gives the same pass@k (here: the untrained start, twice)
    again = Trainer(config, tmp_path / "b", progress=False)
    again.task = DigitFirst()
    again.setup()
    assert again.held_out() == pytest.approx({k[:-len("_before")]: v for k, v in summary.items()
                                              if k.endswith("_before") and k != "accuracy_before"})
    # the before-training numbers live in the checkpoint, so a resumed run reports the same ones
    resumed = Trainer(config, tmp_path / "a", progress=False)
    resumed.task = DigitFirst()
    resumed.setup()
    step, before = resumed.restore()
    resumed.close()
    assert step == 4 and before == {"accuracy": summary["accuracy_before"], "pass@1": summary["pass@1_before"],
                                    "pass@k": summary["pass@k_before"], "entropy": summary["entropy_before"],
                                    "preference_accuracy": summary["preference_accuracy_before"]}


# ------------------------------------------------------------------------------ preference recipes, the same loop

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
    assert (tmp_path / "straight" / "report.html").exists()
    assert {"preference_accuracy_before", "preference_accuracy_after", "accuracy_before"} <= set(summary)
    assert rows[-1]["rewards/margins"] > rows[0]["rewards/margins"]  # DPO widens the margin on its data
    assert resumes_exactly(config, tmp_path / "again")  # the offline pairs are checkpointed with the pipeline


def test_a_checkpoint_of_the_old_preference_trainer_is_refused_with_the_way_out(tmp_path):
    """Its state (step, model, ref, optimizer, before, prev; the pairs in items.json) holds no pipeline state: the
    one trainer cannot resume it, says so and leaves the folder as it was."""
    config = make_config("smoke", recipe="dpo", **{**PREF, "steps": 2, "checkpoint_every": 2})
    train(config, tmp_path, progress=False, report=False)
    (state_file,) = tmp_path.glob("checkpoints/step_*/state.pt")
    state = torch.load(state_file, weights_only=False)
    torch.save({"step": 2, "model": state["model"], "ref": state["model"], "optimizer": state["optimizer"],
                "before": {"preference_accuracy": 0.5}, "prev": None}, state_file)
    files = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    with pytest.raises(ValueError, match=r"holds a checkpoint of the separate preference trainer .* cannot be "
                                         r"resumed\. Train into a new folder \(--out\)"):
        train(config, tmp_path, progress=False, report=False)
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == files


def test_preference_run_from_a_local_jsonl(tmp_path):
    from workbench.tasks import get_task
    from workbench.tasks.preferences import task_pairs, write_pairs

    pairs = task_pairs(get_task("addition"), 16, seed=3)
    write_pairs(pairs, tmp_path / "pairs.jsonl")
    config = make_config("smoke", recipe="dpo", **{**PREF, "steps": 2, "data_path": str(tmp_path / "pairs.jsonl")})
    trainer = Trainer(config, tmp_path / "run", progress=False)
    trainer.run()
    assert len(read_rows(tmp_path / "run" / "metrics.jsonl")) == 2
    assert trainer.pipeline.state["rollout:file-pairs"]["prompts"] == [p.prompt for p in pairs]


def test_a_recipe_needing_rewards_refuses_jsonl_pairs_before_anything_is_built(tmp_path):
    (tmp_path / "x.jsonl").write_text('{"prompt": "1+1=", "chosen": "2", "rejected": "3"}\n')
    config = make_config("smoke", recipe="refuel", **{**PREF, "steps": 1, "data_path": str(tmp_path / "x.jsonl")})
    with pytest.raises(ValueError, match=r"objective:preference reads \['preference_reward'\], which no earlier stage"):
        Trainer(config, tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


def test_data_path_is_refused_by_a_recipe_that_reads_no_pairs(tmp_path):
    with pytest.raises(ValueError, match="rollout 'sampled-pairs', which reads none"):
        Trainer(make_config("smoke", recipe="online-dpo", **PREF, data_path="pairs.jsonl"), tmp_path)


@pytest.mark.covers("sppo", "online-dpo")
def test_iterative_sppo_moves_its_reference_and_resumes_exactly(tmp_path):
    config = make_config("smoke", recipe="sppo", **{**PREF, "steps": 6, "sft_steps": 60, "group_size": 6,
                                                    "checkpoint_every": 3})
    trainer = Trainer(config, tmp_path / "straight", progress=False)
    trainer.run()
    rows = read_rows(tmp_path / "straight" / "metrics.jsonl")
    assert sum(r.get("pairs", 0) for r in rows) > 0  # the verifier separated some of the policy's own samples
    # the reference moved with the iterations: it is no longer the warm start a fresh set-up builds
    fresh = Trainer(config, tmp_path / "straight", progress=False).setup()
    assert not all(torch.equal(a, b) for a, b in zip(trainer.ref.parameters(), fresh.ref.parameters()))
    fresh.close()
    assert resumes_exactly(config, tmp_path / "again", stop_after_step=3)


@pytest.mark.covers("lipo")
def test_a_listwise_batch_holds_k_ranked_rows_per_list(tmp_path):
    trainer = Trainer(make_config("smoke", recipe="lipo", **{**PREF, "steps": 2}), tmp_path, progress=False).setup()
    batch = trainer.make_batch(0)
    assert batch.size == 4 * PREF["prompts_per_step"] and batch.group.tolist() == [i // 4 for i in range(batch.size)]
    assert batch.ref_logp is not None
    assert trainer.train_on(batch, 0)["lipo/pairs_per_list"] > 0
    trainer.close()


def test_lora_dpo_uses_the_adapter_disabled_base_as_reference(tmp_path):
    from workbench.models import AdapterDisabled
    from workbench.train.evaluate import list_logps

    config = make_config("smoke", recipe="dpo", task="addition", steps=2, pairs=16, prompts_per_step=8, sft_steps=0,
                         eval_size=8, lr=1e-2, lora_r=4, max_new_tokens=4)
    trainer = Trainer(config, tmp_path, progress=False)
    trainer.run()
    assert isinstance(trainer.ref, AdapterDisabled)
    plain, _ = load_model("tiny", seed=config.seed)
    items = trainer.pipeline.state["rollout:task-pairs"]
    prompts, lists = items["prompts"][:3], items["responses"][:3]
    with torch.no_grad():
        ref, policy, base = (list_logps(m, trainer.tokenizer, prompts, lists)[0] for m in (trainer.ref, trainer.model,
                                                                                            plain))
    assert torch.allclose(ref, base, atol=1e-5) and not torch.allclose(policy, base, atol=1e-5)


def test_a_preference_run_folder_holds_the_held_out_episodes_after_training(tmp_path):
    config = make_config("smoke", recipe="dpo", **{**PREF, "steps": 1, "sft_steps": 0})
    summary = Trainer(config, tmp_path, progress=False).run()
    records = [json.loads(line) for line in (tmp_path / "eval_after.jsonl").read_text().splitlines()]
    assert len(records) == summary["eval_size"] == PREF["eval_size"]
    assert {"prompt", "completion", "answer", "correct"} <= set(records[0])
    assert sum(r["correct"] for r in records) / len(records) == pytest.approx(summary["accuracy_after"])


def test_loss_overrides_and_kl_coef_reach_the_preference_loss_or_are_refused(tmp_path):
    trainer = Trainer(make_config("smoke", recipe="dpo", **PREF, kl_coef=0.5), tmp_path)
    assert trainer.recipe.objective.kw["beta"] == 0.5 and not trainer.recipe.regularizers  # kl_coef is the loss's beta
    trainer = Trainer(make_config("smoke", recipe="ipo", **PREF,
                                  recipe_overrides={"objective": {"length_average": True}}), tmp_path)
    assert trainer.recipe.objective.kw["length_average"] is True
    with pytest.raises(ValueError, match=r"beta of objective 'preference' is the run's kl_coef: set it with --set "
                                         r"kl_coef=2.0"):
        Trainer(make_config("smoke", recipe="ipo", **PREF, recipe_overrides={"objective": {"beta": 2.0}}), tmp_path)
    with pytest.raises(ValueError, match=r"preference loss 'dpo' takes no \['bta'\] \(did you mean 'beta'\?\); its "
                                         r"keywords: \['beta'"):
        Trainer(make_config("smoke", recipe="dpo", **PREF, recipe_overrides={"objective": {"bta": 1}}), tmp_path)
    with pytest.raises(ValueError, match=r"unknown recipe override 'loss'"):
        Trainer(make_config("smoke", recipe="dpo", **PREF, recipe_overrides={"loss": {}}), tmp_path)
    assert not (tmp_path / "config.json").exists()


# ----------------------------------------------------------------------------- separate policies

def test_separate_policies_need_lora_a_game_and_the_hf_engine_before_the_folder_exists(tmp_path):
    with pytest.raises(ValueError, match=r"recipe 'self-play-separate' trains separate policies, which needs lora_r > 0 "
                                         r"\(each policy is a LoRA adapter on the one base; e\.g\. --set lora_r=8\)$"):
        Trainer(make_config("smoke", recipe="self-play-separate", task="kuhn"), tmp_path / "run")
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())


def test_each_separate_policy_learns_only_from_its_agents_rows(tmp_path):
    from workbench.models import policy_params

    config = make_config("smoke", recipe="self-play-separate",
                         **{**TINY, "task": "kuhn", "lora_r": 4, "steps": 1, "sft_steps": 40})  # legal moves: both act
    trainer = Trainer(config, tmp_path / "run", progress=False).setup()
    start = [[p.detach().clone() for p in policy_params(trainer.model, k)] for k in (0, 1)]
    assert len(trainer.optimizer.param_groups) == 2  # one group (clipped on its own) per policy
    batch = trainer.make_batch(0)  # the reference's forward (the adapter-disabled base) ran: nothing was frozen
    assert set(batch.policy.tolist()) == {0, 1} and torch.equal(batch.policy, batch.agent)
    assert all(p.requires_grad for k in (0, 1) for p in policy_params(trainer.model, k))
    assert all(len(group) == len(policy_params(trainer.model, 0)) > 0 for group in start)
    for player in (0, 1):  # player 0's rows move policy 0 only; then player 1's move policy 1 only
        before = [[p.detach().clone() for p in policy_params(trainer.model, k)] for k in (0, 1)]
        trainer.train_on(batch.select(torch.nonzero(batch.agent == player).flatten()), 0)
        moved = [any(not torch.equal(a, b) for a, b in zip(before[k], policy_params(trainer.model, k))) for k in (0, 1)]
        assert moved == [player == 0, player == 1]
