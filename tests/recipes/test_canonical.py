"""Canonical RL recipes are compositions of registered components, and the loop applies exactly those."""
import pytest
import torch

from tests.helpers import PREF, TINY, DigitFirst
from workbench import ops, registry
from workbench.recipes import RECIPES, get_recipe
from workbench.rewards.length import soft_overlong
from workbench.train import Trainer, make_config, make_trainer
from workbench.train.metrics import read_rows

ISSUE_RECIPES = ["ppo", "grpo", "dr_grpo", "dapo", "gspo", "cispo", "sapo", "gmpo", "rloo", "reinforce_plus_plus", "mdpo",
                 "remax", "opo", "gpg", "lite-ppo", "loop"]


def test_the_canonical_recipes_exist_and_cite_their_paper():
    for key in ISSUE_RECIPES:
        recipe = get_recipe(key)
        assert recipe.title and recipe.summary
        for kind, component in recipe.components():
            registry.get(kind, component)


def trainer_for(recipe, tmp_path, **overrides):
    trainer = Trainer(make_config("smoke", recipe=recipe, **{**TINY, "steps": 1, **overrides}), tmp_path,
                      progress=False)
    trainer.task = DigitFirst()
    return trainer.setup()


@pytest.mark.covers("dapo", "dynamic-sampling", "soft-overlong")
def test_dapo_step_equals_the_explicit_composition_of_its_components(tmp_path):
    trainer = trainer_for("dapo", tmp_path)
    batch = trainer.make_batch(0)
    # dynamic sampling: every kept group has reward spread, unless nothing informative was found
    if trainer.rollout_info["sampling/shortfall_groups"] < trainer.config.prompts_per_step:
        spread = torch.stack([batch.rewards[batch.group == g].std() for g in batch.group.unique()])
        assert torch.all(spread > 0)
    # soft overlong shaping applied to the raw verifier scores
    shaped = soft_overlong(batch.scores, batch.lengths, max_len=trainer.config.max_new_tokens, buffer=4)
    assert torch.allclose(batch.rewards, shaped)
    # advantages are plain GRPO of the shaped rewards
    assert torch.allclose(batch.advantages, registry.get("advantage", "grpo").fn(batch).float())
    # the loss is ppo-clip(0.2, 0.28) with token-mean and nothing else (no KL, no entropy)
    denom = ops.Denominators.of(batch.mask, norm_constant=batch.size * trainer.config.max_new_tokens)
    loss, _ = trainer.minibatch_loss(batch, denom)
    from workbench.rollout import policy_forward

    logp, _, _ = policy_forward(trainer.model, batch.prompt_ids, batch.prompt_mask, batch.response_ids,
                                batch.mask, trainer.config.temperature)
    expected, _ = registry.get("objective", "ppo-clip").fn(logp, batch.old_logp, batch.advantages, batch.mask,
                                                           agg="token-mean", denom=denom, eps_low=0.2, eps_high=0.28)
    assert torch.allclose(loss, expected)


@pytest.mark.covers("dapo")
def test_toggling_one_component_changes_only_its_contribution(tmp_path):
    base = trainer_for("dapo", tmp_path / "a")
    with_kl = trainer_for("dapo", tmp_path / "b", kl_coef=0.5)  # adds k3 KL in the loss
    batch = base.make_batch(0)
    denom = ops.Denominators.of(batch.mask)
    loss_a, _ = base.minibatch_loss(batch, denom)
    batch.ref_logp = batch.old_logp + 0.1 * batch.mask  # a reference that differs from the policy
    loss_b, _ = with_kl.minibatch_loss(batch, denom)
    from workbench.regularizers.kl_penalty import kl_in_loss
    from workbench.rollout import policy_forward

    logp, _, _ = policy_forward(base.model, batch.prompt_ids, batch.prompt_mask, batch.response_ids, batch.mask)
    kl_term, _ = kl_in_loss(logp, batch.ref_logp, batch.mask, beta=0.5, estimator="k3", agg="token-mean",
                            denom=denom)
    assert torch.allclose(loss_b - loss_a, kl_term, atol=1e-6)


@pytest.mark.covers("remax")
def test_remax_fills_the_greedy_baseline(tmp_path):
    trainer = trainer_for("remax", tmp_path)
    batch = trainer.make_batch(0)
    G = trainer.config.group_size
    assert batch.baseline_rewards is not None and batch.baseline_rewards.shape == (batch.size,)
    assert torch.all(batch.baseline_rewards.view(-1, G) == batch.baseline_rewards.view(-1, G)[:, :1])
    assert torch.allclose(batch.advantages[:, 0], (batch.rewards - batch.baseline_rewards).float())


@pytest.mark.covers("loop")
def test_loop_drops_rollouts_with_tiny_advantages(tmp_path):
    trainer = trainer_for("loop", tmp_path)
    batch = trainer.make_batch(0)
    small = batch.advantages.abs().amax(-1) < 0.01
    assert torch.all(batch.mask[small] == 0)
    assert trainer.rollout_info["filtered_frac/min-abs-advantage"] == pytest.approx(float(small.float().mean()))
    assert RECIPES["loop"].objective.kw["eps_low"] == pytest.approx(1 - 1 / 1.1)


@pytest.mark.covers("tis")
def test_objective_inputs_reach_the_objective(tmp_path):
    trainer = trainer_for("grpo", tmp_path, recipe_overrides={"objective": "tis"})  # tis reads mu_logp
    batch = trainer.make_batch(0)
    loss, metrics = trainer.minibatch_loss(batch, ops.Denominators.of(batch.mask))
    assert "tis/mean_weight" in metrics and torch.isfinite(loss)


@pytest.mark.covers("mdpo")
def test_mdpo_weight_follows_its_schedule_in_the_loop(tmp_path):
    from workbench.schedules.mdpo import mdpo_inv_t

    trainer = trainer_for("mdpo", tmp_path, steps=10)
    batch = trainer.make_batch(0)
    denom = ops.Denominators.of(batch.mask)
    _, first = trainer.minibatch_loss(batch, denom, step=0)
    _, late = trainer.minibatch_loss(batch, denom, step=9)
    assert first["mdpo/inv_t"] == pytest.approx(mdpo_inv_t(0, 10))
    assert late["mdpo/inv_t"] == pytest.approx(mdpo_inv_t(9, 10)) and late["mdpo/inv_t"] > first["mdpo/inv_t"]


@pytest.mark.covers("minirl")
def test_minirl_reads_the_engine_logprobs_and_is_reinforce_on_policy(tmp_path):
    trainer = trainer_for("minirl", tmp_path)
    batch = trainer.make_batch(0)
    denom = ops.Denominators.of(batch.mask)
    from workbench.rollout import policy_forward

    logp, _, _ = policy_forward(trainer.model, batch.prompt_ids, batch.prompt_mask, batch.response_ids, batch.mask)
    loss, _ = registry.get("objective", "minirl").fn(logp, batch.old_logp, batch.advantages, batch.mask,
                                                     mu_logp=batch.mu_logp, denom=denom)
    (g,) = torch.autograd.grad(loss, logp)
    reinforce = ops.aggregate(-batch.advantages * logp, batch.mask, "seq-mean-token-mean", denom)
    (g_ref,) = torch.autograd.grad(reinforce, logp)
    assert torch.allclose(g, g_ref, atol=1e-5)  # mu = pi_old = pi_theta up to float noise: plain REINFORCE


@pytest.mark.covers("t-ppo")
def test_t_ppo_trains_the_critic_on_finished_responses_only(tmp_path):
    trainer = trainer_for("t-ppo", tmp_path, max_new_tokens=2)  # a 2-token budget truncates most answers
    batch = trainer.make_batch(0)
    assert bool(batch.truncated.any())
    assert torch.all(batch.value_mask[batch.truncated] == 0)
    assert torch.equal(batch.value_mask[~batch.truncated], batch.mask[~batch.truncated])
    loss, metrics = trainer.minibatch_loss(batch, ops.Denominators.of(batch.mask))
    assert torch.isfinite(loss)


@pytest.mark.covers("ppo-max")
def test_ppo_max_with_every_trick_off_is_ppo_and_resumes_exactly(tmp_path):
    from tests.helpers import metric_rows, resumes_exactly, run_task

    off = {"reward_shaping:ppo-max": {"normalize": False, "clip": False}}
    run_task(make_config("smoke", recipe="ppo-max", **{**TINY, "recipe_overrides": off}), tmp_path / "off",
             DigitFirst())
    run_task(make_config("smoke", recipe="ppo", **TINY), tmp_path / "ppo", DigitFirst())
    assert metric_rows(tmp_path / "off") == metric_rows(tmp_path / "ppo")
    assert resumes_exactly(make_config("smoke", recipe="ppo-max", **TINY), tmp_path, task=DigitFirst())


@pytest.mark.covers("spo-minimax")
def test_spo_recipe_trains_on_win_rates(tmp_path):
    config = make_config("smoke", recipe="spo-minimax", **{**PREF, "steps": 2, "group_size": 4})
    trainer = make_trainer(config, tmp_path, progress=False).setup()
    batch = trainer.make_batch(0)
    assert torch.allclose(batch.rewards.view(-1, 4).mean(-1), torch.full((8,), 0.5, dtype=batch.rewards.dtype))
    wins = batch.rewards.view(-1, 4)
    scores = batch.scores.view(-1, 4)
    assert all(wins[g, i] > wins[g, j] for g in range(8) for i in range(4) for j in range(4)
               if scores[g, i] > scores[g, j])  # the reward orders the samples as the verifier does
    trainer.run()
    assert all(r["spo/reward_mean"] == pytest.approx(0.5) for r in read_rows(tmp_path / "metrics.jsonl"))


@pytest.mark.covers("salsa")
def test_salsa_starts_at_and_stays_anchored_to_the_soup_of_two_sft_runs(tmp_path):
    import dataclasses

    from workbench.models import load_model
    from workbench.train.sft import warm_start

    config = make_config("smoke", recipe="salsa", **{**PREF, "steps": 2})
    trainer = make_trainer(config, tmp_path, progress=False).setup()
    sft = [load_model(str(warm_start(dataclasses.replace(config, seed=s), trainer.task, progress=False)),
                      seed=s)[0].state_dict() for s in (0, 1)]
    for name, p in trainer.model.state_dict().items():
        assert torch.allclose(p, (sft[0][name] + sft[1][name]) / 2, atol=1e-6), name
        assert torch.equal(p, trainer.ref.state_dict()[name])
    assert not torch.equal(sft[0]["lm_head.weight"], sft[1]["lm_head.weight"])  # two different SFT runs
    trainer.run()
    assert read_rows(tmp_path / "metrics.jsonl")[0]["kl"] == pytest.approx(0.0, abs=1e-6)
