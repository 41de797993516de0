"""The anchors and data behind the F7 preference recipes: previous-iterate models (INPO, Nash-MP, APO),
K-response lists (SPO-prefdeg, BRAIn), partial steps (MCTS-DPO, Direct-Advantage-PO)."""
import pytest
import torch

from tests.helpers import PREF, resumes_exactly
from workbench.train import make_config, make_trainer
from workbench.train.metrics import read_rows


def anchors(trainer):
    fresh = make_trainer(trainer.config, trainer.out / "fresh", progress=False).setup()
    same = lambda a, b: all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))  # noqa: E731
    return fresh, same


@pytest.mark.covers("inpo", "nash-mp")
@pytest.mark.parametrize("recipe", ["inpo", "nash-mp"])
def test_inpo_and_nash_mp_move_the_previous_iterate_and_keep_the_reference(recipe, tmp_path):
    config = make_config("smoke", recipe=recipe, **PREF)
    trainer = make_trainer(config, tmp_path / "run", progress=False)
    trainer.run()
    fresh, same = anchors(trainer)
    assert same(trainer.ref, fresh.ref)            # pi_ref stays the warm start
    assert not same(trainer.prev, fresh.prev)      # pi_t became the policy at step 5
    assert sum(r["pairs"] for r in read_rows(tmp_path / "run" / "metrics.jsonl")) > 0


@pytest.mark.covers("apo-accelerated")
def test_apo_momentum_shifts_reference_and_keeps_the_iterate_before(tmp_path):
    config = make_config("smoke", recipe="apo-accelerated", **PREF)
    trainer = make_trainer(config, tmp_path / "run", progress=False)
    trainer.run()
    fresh, same = anchors(trainer)
    assert same(trainer.prev, fresh.ref)           # pi^_{t-1}: the warm start (the reference before step 5)
    assert not same(trainer.ref, fresh.ref)        # pi^_t: the policy at step 5
    rows = read_rows(tmp_path / "run" / "metrics.jsonl")
    shifts = {r["step"]: r["apo/ref_shift"] for r in rows if "apo/ref_shift" in r}
    assert all(abs(shifts[s]) < 1e-5 for s in shifts if s < 5)  # first iteration: pi^_{t-1} = pi^_t, no momentum


def test_inpo_resumes_exactly_across_an_iteration_boundary(tmp_path):
    config = make_config("smoke", recipe="inpo", **PREF)
    assert resumes_exactly(config, tmp_path, stop_after_step=3)


def test_a_prev_input_without_a_previous_model_is_a_clear_error(tmp_path, monkeypatch):
    import dataclasses

    from workbench import recipes

    broken = dataclasses.replace(recipes.RECIPES["inpo"], reference=recipes.use("iterate", every=5))
    monkeypatch.setitem(recipes.RECIPES, "inpo", broken)
    with pytest.raises(ValueError, match=r"prev_logp is the previous iterate's: give the recipe a reference that "
                                         r"keeps one \(momentum, previous-iterate\)"):
        make_trainer(make_config("smoke", recipe="inpo", **{**PREF, "steps": 1}), tmp_path, progress=False)


@pytest.mark.covers("spo-prefdeg", "brain")
@pytest.mark.parametrize("recipe,k", [("spo-prefdeg", 4), ("brain", 4)])
def test_list_recipes_feed_k_responses_per_prompt(recipe, k, tmp_path):
    config = make_config("smoke", recipe=recipe, **{**PREF, "steps": 2})
    trainer = make_trainer(config, tmp_path, progress=False)
    trainer.run()
    batch = trainer.make_batch(0)  # one group per item, its k responses as rows
    assert torch.equal(batch.group, torch.arange(batch.size // k).repeat_interleave(k))
    rows = read_rows(tmp_path / "metrics.jsonl")
    key = "spo/degree_accuracy" if recipe == "spo-prefdeg" else "brain/alpha_ess"
    assert all(key in r for r in rows)
    if recipe == "brain":
        assert batch.preference_reward.shape == (batch.size,)
        assert all(1.0 <= r["brain/alpha_ess"] <= k for r in rows)


@pytest.mark.covers("mcts-dpo", "direct-advantage-po")
@pytest.mark.parametrize("recipe", ["mcts-dpo", "direct-advantage-po"])
def test_step_level_recipes_train_on_partial_steps(recipe, tmp_path):
    config = make_config("smoke", recipe=recipe, **{**PREF, "steps": 2, "pairs": 8})
    trainer = make_trainer(config, tmp_path, progress=False)
    trainer.run()
    if recipe == "direct-advantage-po":
        items = trainer.pipeline.state["rollout:advantage-steps"]  # built once, kept in every checkpoint
        assert len(items["prompts"]) == len(items["ends"]) == len(items["labels"]["step_advantage"]) > 0
        assert any(not end[0] for end in items["ends"])  # partial steps are scored without EOS
    rows = read_rows(tmp_path / "metrics.jsonl")
    assert len(rows) == 2 and all(r.get("grad_norm", 0) >= 0 for r in rows)
