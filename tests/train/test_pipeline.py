"""The pipeline: stages run in their fixed order, parts that don't fit are refused at start, state resumes."""
import json

import pytest
import torch

from tests.helpers import TINY, DigitFirst, DigitSteps, poses_questions, resumes_exactly, step_context, task_for
from workbench import registry
from workbench.batch import RolloutBatch
from workbench.recipes import RECIPES, Recipe, get_recipe, use, with_overrides
from workbench.train import Trainer, make_config
from workbench.train.glossary import unexplained
from workbench.train.metrics import read_rows
from workbench.rollout.engine import policy_forward
from workbench.train.pipeline import Pipeline


def trainer_for(recipe, tmp_path, **overrides):
    trainer = Trainer(make_config("smoke", recipe=recipe, **{**TINY, **overrides}), tmp_path, progress=False)
    trainer.task = DigitFirst()
    return trainer


# ------------------------------------------------------------------------------ the order of the stages

@pytest.fixture
def probes():
    """Components in every slot that record when they run and what the batch holds by then."""
    calls = []

    class Sampler:
        init = staticmethod(lambda: None)
        update = staticmethod(lambda state, batch: calls.append("sampler.update") or state)

        @staticmethod
        def select(state, task, n, rng):
            calls.append("sampler")
            return task.sample(n, rng)

    class Counter:
        init = staticmethod(lambda *, initial: {"steps": 0, "initial": initial})
        value = staticmethod(lambda state: state["initial"])

        @staticmethod
        def update(state, batch, metrics):
            calls.append("controller")
            return {**state, "steps": state["steps"] + 1}

    def rollout(engine, task, examples, **kw):
        calls.append("rollout")
        return registry.get("rollout", "turns").fn(engine, task, examples, **kw)

    def reward(completions, **columns):
        calls.append("rewards")
        assert {"prompts", "completion_ids", "answer", "max_new_tokens", "step"} <= set(columns)
        return [0.0] * len(completions)

    def transform(batch, ctx):
        calls.append("group_transform")
        assert batch.old_logp is None and batch.scores is not None  # before the forward passes
        return batch

    def shaping(batch, ctx):
        calls.append("reward_shaping")
        assert batch.old_logp is not None and batch.ref_logp is not None and batch.advantages is None
        return batch

    def doubled(batch):
        calls.append("advantage[1]")
        return 2 * batch.advantages  # a later chain entry reads the earlier one's advantages

    def mask(batch):
        calls.append("token_mask")
        assert batch.advantages is not None
        return batch.mask

    def regularizer(forward, batch, *, agg, denom):
        calls.append("regularizer")
        return forward.logp.sum() * 0, {}

    registered = [("sampler", "probe", Sampler, ()), ("controller", "probe", Counter, ()),
                  ("rollout", "probe", rollout, ()), ("reward", "probe", reward, ()),
                  ("group_transform", "probe", transform, ()),
                  ("reward_shaping", "probe", shaping, ("old_logp", "ref_logp")),
                  ("advantage", "probe-doubled", doubled, ("advantages",)), ("token_mask", "probe", mask, ()),
                  ("regularizer", "probe", regularizer, ())]
    for kind, key, fn, reads in registered:
        registry.register(kind, key, title="probe", summary="records when it runs", family="pipeline",
                          reads=reads)(fn)
    yield calls
    for kind, key, *_ in registered:
        registry._REGISTRY[kind].pop(key)


def probe_recipe():
    return Recipe(key="probe", title="t", summary="s", sampler="probe", rollout="probe", rewards=["probe"],
                  group_transforms=["probe"], reward_shaping=["probe"], advantage=["grpo", "probe-doubled"],
                  token_masks=["probe"], regularizers=["probe", use("kl-penalty", beta=0.1)],
                  controllers=[use("probe", into="regularizer:kl-penalty.beta")])


def test_a_step_runs_the_stages_in_the_documented_order(probes, tmp_path, monkeypatch):
    monkeypatch.setitem(RECIPES, "probe", probe_recipe())
    trainer = trainer_for("probe", tmp_path, steps=1, minibatches=1).setup()
    assert not trainer.on_policy  # the reward shaping reads old_logp: the forward pass must supply it
    probes.clear()  # building the recipe called the reward once (its settings' and its return's checks)
    row = trainer.step(0)
    assert probes == ["sampler", "rollout", "rewards", "group_transform", "reward_shaping", "advantage[1]",
                      "token_mask", "regularizer", "controller", "sampler.update"]
    assert trainer.pipeline.state["controller:probe"]["steps"] == 1 and row["kl_coef"] == 0.1


def test_an_advantage_chain_entry_reads_the_previous_advantages(probes, tmp_path, monkeypatch):
    monkeypatch.setitem(RECIPES, "probe", probe_recipe())
    trainer = trainer_for("probe", tmp_path).setup()
    batch = trainer.make_batch(0)
    assert torch.allclose(batch.advantages, 2 * registry.get("advantage", "grpo").fn(batch).float())


# ------------------------------------------------------------------------------ parts that don't fit

@pytest.mark.parametrize("recipe, message", [
    (Recipe(key="r", title="t", summary="s", advantage=["remax"]),
     r"advantage:remax reads \['baseline_rewards'\].*group_transform:greedy-baseline"),
    (Recipe(key="r", title="t", summary="s", advantage=["grpo"], value="value-loss"),
     r"value:value-loss reads \['returns', 'value_mask'\].*advantage:gae"),
    (Recipe(key="r", title="t", summary="s", advantage=["grpo"], objective=use("ppo-clip", eps_hgh=0.3)),
     r"objective 'ppo-clip' takes no 'eps_hgh' \(did you mean 'eps_high'\?\); its parameters: \['dual_clip_c', "
         r"'eps_high', 'eps_low', 'logr_clamp'\]"),
    (Recipe(key="r", title="t", summary="s", advantage=["grpo"], sampler=use("pool", siz=8)),
     r"sampler 'pool' takes no 'siz' \(did you mean 'size'\?\); its parameters: \['history', 'order', 'pool_seed', "
     r"'size'\]"),
    (Recipe(key="r", title="t", summary="s", advantage=["grpo"], objective="ppo-clipp"),
     r"slot objective: no objective named 'ppo-clipp'"),
    (Recipe(key="r", title="t", summary="s", advantage=["grpo"], controllers=[use("adaptive-kl", into="regularizer:kl-penalty.beta")]),
     r"drives into='regularizer:kl-penalty.beta', which names no component parameter"),
    (Recipe(key="r", title="t", summary="s", advantage=["grpo"], regularizers=[use("kl-penalty")],
            controllers=[use("adaptive-kl", into="regularizer:kl-penalty.gamma")]),
     r"drives 'gamma', which regularizer:kl-penalty does not take"),
    (Recipe(key="r", title="t", summary="s", advantage=["grpo"], agg="token-sum"), "unknown aggregation"),
])
def test_a_recipe_whose_parts_do_not_fit_is_refused_naming_the_missing_piece(recipe, message):
    with pytest.raises(ValueError, match=message):
        Pipeline(recipe)


def test_the_reference_pass_runs_only_when_something_reads_it(tmp_path):
    assert trainer_for("grpo", tmp_path / "a", track_kl=False, kl_coef=0.0).setup().ref is None
    assert trainer_for("grpo", tmp_path / "b", track_kl=False).setup().ref is not None  # k3 KL in the loss


def test_a_critic_recipe_needs_an_advantage_with_critic_targets(tmp_path):
    with pytest.raises(ValueError, match=r"value:value-loss reads \['returns', 'value_mask'\].*gae"):
        Trainer(make_config("smoke", recipe="grpo", recipe_overrides={"value": "value-loss"}), tmp_path)


# ------------------------------------------------------------------------------ overrides

def test_overrides_merge_replace_and_add_components():
    grpo = get_recipe("grpo")
    r = with_overrides(grpo, {"objective": {"eps_high": 0.28}, "advantage": {"scale": "none"}})
    assert r.objective.key == "ppo-clip" and r.objective.kw == {"eps_high": 0.28}
    assert r.advantage[0].kw == {"scale": "none"}
    assert with_overrides(grpo, {"objective": "tis"}).objective.key == "tis"
    assert with_overrides(grpo, {"objective_kw": {"eps_low": 0.1}}).objective.kw == {"eps_low": 0.1}  # old name
    assert with_overrides(grpo, {}, kl_coef=0.0).kl_term() is None                     # beta 0: no KL term
    assert with_overrides(grpo, {}, kl_coef=0.5).kl_term().kw["beta"] == 0.5
    assert with_overrides(get_recipe("dapo"), {}, kl_coef=0.5).kl_term().key == "kl-penalty"  # added in the loss
    assert with_overrides(get_recipe("rloo"), {}, kl_coef=0.2).kl_term().key == "kl-in-reward"
    assert with_overrides(grpo, {}, entropy_coef=0.01).regularizers[-1].key == "entropy-bonus"
    ppo_max = with_overrides(get_recipe("ppo-max"), {"reward_shaping:ppo-max": {"clip": False}})
    assert [u.kw for u in ppo_max.reward_shaping] == [{"delta": 5.0, "clip": False}, {"beta": 0.05, "estimator": "k1"}]
    with pytest.raises(ValueError, match="must name exactly one"):
        with_overrides(ppo_max, {"reward_shaping": {"clip": True}})
    with pytest.raises(ValueError, match="unknown recipe override 'kl_cof'"):
        with_overrides(grpo, {"kl_cof": 1})


# ------------------------------------------------------------------------------ state and resume

PREFERENCE_RECIPES = sorted(k for k, r in RECIPES.items() if r.objective.key == "preference")
# lspo's pairs come from werewolf games: its resume is tests/recipes/test_multiagent_lspo.py's (PREF is addition's)
ONE_AGENT_PREFERENCE = [k for k in PREFERENCE_RECIPES if RECIPES[k].rollout.key != "lspo"]
RL_RECIPES = sorted(set(RECIPES) - set(PREFERENCE_RECIPES))
PREF = dict(TINY, pairs=16, sft_steps=20, max_new_tokens=5, group_size=4, steps=6, checkpoint_every=3)


def test_a_component_that_needs_what_the_task_lacks_is_refused_before_anything_runs(monkeypatch):
    from dataclasses import replace

    from workbench.train.pipeline import task_capabilities

    entry = registry.get("advantage", "gigpo")
    monkeypatch.setitem(registry._REGISTRY["advantage"], "gigpo", replace(entry, needs=("multi_turn", "env_actions")))
    pipeline = Pipeline(get_recipe("gigpo"))
    with pytest.raises(ValueError, match=r"advantage:gigpo needs episodes of several turns .* task 'digit_first' has "
                                         r"none\. Train it on a task that does: --task calculator \| gridworld \| "
                                         r"keydoor \| screen \| search \| search-propose$"):
        pipeline.check_task(DigitFirst())
    pipeline.check_task(DigitSteps())  # three turns, actions() listed
    assert task_capabilities(DigitSteps()) == {"multi_turn": True, "env_copy": True, "env_actions": True,
                                               "expert": True, "subgoals": True, "solution": True, "agents": False,
                                               "phases": False, "proposer": False}
    assert task_capabilities(DigitFirst())["multi_turn"] is False


def test_games_and_multi_agent_recipes_refuse_what_does_not_fit_before_anything_runs():
    from workbench.envs.poker import KuhnTask

    with pytest.raises(ValueError, match=r"rollout:agents needs several agents taking turns .* task 'digit_first' has "
                                         r"none\. Train it on a task that does: --task .*kuhn"):
        Pipeline(get_recipe("self-play")).check_task(DigitFirst())
    with pytest.raises(ValueError, match=r"task 'kuhn' is a game of several agents: recipe 'grpo' has no rollout that "
                                         r"plays one; use a multi-agent recipe .*--recipe .*self-play"):
        Pipeline(get_recipe("grpo")).check_task(KuhnTask())
    seated = with_overrides(get_recipe("self-play-vs-scripted"), {"rollout": {"seat": "dealer"}})
    with pytest.raises(ValueError, match=r"rollout:agents: unknown agent 'dealer': this game's agents are "
                                         r"\['player0', 'player1'\]"):
        Pipeline(seated).check_task(KuhnTask())
    Pipeline(with_overrides(get_recipe("self-play-vs-scripted"), {"rollout": {"seat": 1}})).check_task(KuhnTask())


def test_a_game_is_evaluated_by_playing_it_so_pass_k_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"pass_k=4 samples answers to held-out prompts; task 'kuhn' is a game"):
        Trainer(make_config("smoke", recipe="self-play", task="kuhn", pass_k=4), tmp_path / "run")
    assert not (tmp_path / "run" / "config.json").exists()


@pytest.mark.parametrize("recipe", RL_RECIPES)
def test_every_recipe_trains_end_to_end_and_resumes_exactly(recipe, tmp_path):
    """Each recipe trains (a gradient on some step, every metric explained, its value loss when it has a critic, the
    held-out accuracy after), and killed after step 2 (checkpoint 2) and resumed, it logs row for row what the
    straight run logs (a recipe that needs multi-turn episodes runs on three-turn DigitSteps)."""
    overrides, task = task_for(recipe, **TINY)  # partly solvable from scratch: a learning signal
    assert resumes_exactly(make_config("smoke", recipe=recipe, **overrides), tmp_path, task=task)
    rows = read_rows(tmp_path / "straight" / "metrics.jsonl")
    assert len(rows) == TINY["steps"] and all(r["grad_norm"] >= 0 for r in rows)
    # an untrained model poses no valid question, so SSP has nothing to learn here: its gradient is checked with a
    # scripted engine (tests/transforms/test_ssp.py)
    assert any(r["grad_norm"] > 0 for r in rows) or poses_questions(recipe)
    assert not unexplained(set().union(*rows)), unexplained(set().union(*rows))
    if RECIPES[recipe].value is not None:
        assert "value/loss" in rows[0]
    assert "accuracy_after" in json.loads((tmp_path / "straight" / "summary.json").read_text())


@pytest.mark.parametrize("recipe", ONE_AGENT_PREFERENCE)
def test_every_preference_recipe_resumes_exactly(recipe, tmp_path):
    """Killed after step 3, across the iteration boundary of the iterative ones (their anchors move every 5)."""
    config = make_config("smoke", recipe=recipe, **PREF)
    assert resumes_exactly(config, tmp_path, stop_after_step=3)
    rows = read_rows(tmp_path / "straight" / "metrics.jsonl")
    assert len(rows) == PREF["steps"] and not unexplained(set().union(*rows)), unexplained(set().union(*rows))


def test_on_policy_steps_take_old_logp_from_the_training_forward(tmp_path, monkeypatch):
    """One epoch, one minibatch: no separate old-log-prob pass, ratio exactly 1, and the same update."""
    on = trainer_for("grpo", tmp_path / "on", minibatches=1).setup()
    assert on.on_policy
    batch = on.make_batch(0)
    assert batch.old_logp is None
    metrics = on.train_on(batch, 0)
    assert metrics["kl/k1_old"] == 0 and metrics["clip/out_of_band"] == 0
    assert batch.old_logp is not None and batch.entropy is not None  # filled in for the step's metrics
    monkeypatch.setattr(Trainer, "on_policy", property(lambda self: False))
    off = trainer_for("grpo", tmp_path / "off", minibatches=1).setup()
    off_batch = off.make_batch(0)
    off.train_on(off_batch, 0)
    assert torch.allclose(batch.old_logp, off_batch.old_logp, atol=1e-5)
    for p_on, p_off in zip(on.model.parameters(), off.model.parameters()):
        assert torch.allclose(p_on, p_off, atol=1e-6)


def test_old_logp_from_the_rollout_skips_the_old_pass_and_matches_it(tmp_path, monkeypatch):
    """old_logp='rollout' (two minibatches): pi_old's log-probs are the sampler's mu_logp, equal to the forward pass's
    up to the KV cache's rounding; the entropies come from the training forwards; the update is the same."""
    calls = []
    rollout = trainer_for("grpo", tmp_path / "rollout", old_logp="rollout").setup()
    assert not rollout.on_policy
    monkeypatch.setattr("workbench.train.trainer.policy_forward",
                        lambda *a, **k: calls.append(a[0]) or policy_forward(*a, **k))
    batch = rollout.make_batch(0)
    assert calls == [rollout.ref] and torch.equal(batch.old_logp, batch.mu_logp * batch.mask)
    assert batch.entropy is None
    metrics = rollout.train_on(batch, 0)
    assert batch.entropy is not None and float((batch.entropy * batch.mask).sum()) > 0
    forward = trainer_for("grpo", tmp_path / "forward").setup()
    forward_batch = forward.make_batch(0)
    assert torch.equal(forward_batch.response_ids, batch.response_ids)
    assert torch.allclose(forward_batch.old_logp, batch.old_logp, atol=1e-5)
    forward_metrics = forward.train_on(forward_batch, 0)
    assert metrics == pytest.approx(forward_metrics, rel=1e-4, abs=1e-6)  # ratios, clipping, losses, gradient norms
    first = rollout.minibatch_rows(batch, torch.Generator().manual_seed(rollout.config.seed * 7919))[0]
    assert torch.allclose(batch.entropy[first], forward_batch.entropy[first], atol=1e-5)  # before any update


@pytest.mark.parametrize("recipe, overrides, match", [
    ("ppo", {}, "its critic's values come from the old policy's forward pass"),
    ("grpo", {"top_p": 0.9}, r"renormalizes over the nucleus: set top_p=1.0, or old_logp='forward'"),
    ("grpo", {"rollout_is": "token_truncate"}, r"which is 1 when old_logp='rollout'"),
])
def test_old_logp_from_the_rollout_is_refused_where_it_is_not_pi_old(recipe, overrides, match, tmp_path):
    with pytest.raises(ValueError, match=match):
        trainer_for(recipe, tmp_path, old_logp="rollout", **overrides)


# ------------------------------------------------------------------------------ the reward stage

def reward_stage(recipe_rewards, completions=("12", "345", "6"), metrics=None, **recipe_kw):
    from workbench.context import StepContext
    from workbench.tasks import Example

    ids = torch.tensor([[5, 6, 2, 0], [7, 8, 9, 2], [4, 2, 0, 0]])
    mask = (torch.arange(4)[None, :] < torch.tensor([3, 4, 2])[:, None]).float()
    batch = RolloutBatch(response_ids=ids, mask=mask, group=torch.tensor([0, 0, 1]),
                         rewards=torch.tensor([1.0, 0.0, 1.0]), completions=list(completions), prompts=["a", "a", "b"])
    examples = [Example("a", "12", "12"), Example("b", "6", "6")]
    pipeline = Pipeline(Recipe(key="r", title="t", summary="s", advantage=["grpo"], rewards=recipe_rewards,
                               **recipe_kw))
    ctx = StepContext(step=0, total_steps=1, seed=0, group_size=2, prompts_per_step=2, max_new_tokens=4,
                      examples=examples, metrics={} if metrics is None else metrics)
    return pipeline.reward(batch, ctx)


@pytest.mark.covers("soft-overlong")
def test_reward_functions_add_to_the_environment_reward_with_their_weight():
    from workbench.rewards.length import soft_overlong

    out = reward_stage([use("soft-overlong", buffer=2, weight=0.5)])
    lengths = torch.tensor([3.0, 4.0, 2.0])  # tokens up to and including EOS (id 2)
    penalty = soft_overlong(torch.zeros(3, dtype=torch.float64), lengths, max_len=4, buffer=2)
    assert torch.equal(out.scores, torch.tensor([1.0, 0.0, 1.0]))  # the environment's reward, kept apart
    assert torch.allclose(out.rewards, out.scores + 0.5 * penalty.float())
    assert penalty.tolist() == [-0.5, -1.0, 0.0]


def test_a_bad_reward_function_is_named_before_it_poisons_the_batch():
    def register(key, fn):
        registry.register("reward", key, title="t", summary="s", family="pipeline")(fn)

    register("test-none", lambda completions, **kw: [None, 1.0, None])
    register("test-short", lambda completions, **kw: [1.0])
    register("test-nan", lambda completions, **kw: [float("nan")] * len(completions))
    try:
        assert reward_stage(["test-none"]).rewards.tolist() == [1.0, 1.0, 1.0]  # None counts 0 (TRL's nansum)
        with pytest.raises(ValueError, match="reward 'test-short' returned 1 values for 3 completions"):
            reward_stage(["test-short"])
        with pytest.raises(ValueError, match=r"reward 'test-nan' returned NaN/inf for rows \[0, 1, 2\]"):
            reward_stage(["test-nan"])
    finally:
        for key in ("test-none", "test-short", "test-nan"):
            registry._REGISTRY["reward"].pop(key)


def register_test_reward(key, fn):
    registry.register("reward", key, title="t", summary="s", family="pipeline")(fn)


def test_per_reward_metrics_task_weight_and_normalize_then_sum():
    register_test_reward("test-len", lambda completions, **kw: [float(len(c)) for c in completions])
    try:
        metrics = {}
        out = reward_stage([use("test-len", weight=0.1)], metrics=metrics)
        assert torch.allclose(out.rewards, torch.tensor([1.2, 0.3, 1.1]))
        assert metrics["rewards/task/mean"] == pytest.approx(2 / 3) and metrics["rewards/test-len/mean"] == 2.0
        assert metrics["rewards/test-len/std"] == pytest.approx(1.0) and metrics["rewards/unscorable_frac"] == 0.0
        alone = reward_stage([use("test-len", weight=0.1)], task_reward=0.0)
        assert torch.allclose(alone.rewards, torch.tensor([0.2, 0.3, 0.1])) and torch.equal(alone.scores, out.scores)
        normalized = reward_stage([use("test-len", weight=0.1)], reward_aggregation="normalize_then_sum")
        # group 0: task (1, 0) and length (2, 3) each z-score to -+0.5 / (std 0.5**0.5 + 1e-4); group 1 has one row
        z = 0.5 / (0.5 ** 0.5 + 1e-4)
        assert torch.allclose(normalized.rewards, torch.tensor([z - 0.1 * z, -z + 0.1 * z, 0.0]))
    finally:
        registry._REGISTRY["reward"].pop("test-len")


def test_task_reward_scales_the_verifier_alone_too():
    assert reward_stage([], task_reward=0.5).rewards.tolist() == [0.5, 0.0, 0.5]


def test_rows_no_reward_applies_to_are_masked_and_logged():
    register_test_reward("test-some", lambda completions, **kw: [1.0, None, None])
    try:
        metrics = {}
        out = reward_stage(["test-some"], metrics=metrics, task_reward=0.0)
        assert out.rewards.tolist() == [1.0, 1.0, 0.0] and out.mask.sum(-1).tolist() == [3.0, 0.0, 0.0]
        assert metrics["rewards/unscorable_frac"] == pytest.approx(2 / 3)
    finally:
        registry._REGISTRY["reward"].pop("test-some")


def test_reward_settings_are_checked_before_anything_runs():
    with pytest.raises(ValueError, match="unknown reward_aggregation 'mean'"):
        Pipeline(Recipe(key="r", title="t", summary="s", rewards=["soft-overlong"], reward_aggregation="mean"))
    with pytest.raises(ValueError, match="task_reward=0 leaves no reward at all"):
        Pipeline(Recipe(key="r", title="t", summary="s", task_reward=0.0))
    with pytest.raises(ValueError, match="cannot import 'nope' from 'trl.rewards'"):
        Pipeline(Recipe(key="r", title="t", summary="s", rewards=["trl.rewards:nope"]))
    with pytest.raises(ValueError, match="not callable; a factory needs build"):
        Pipeline(Recipe(key="r", title="t", summary="s", rewards=["math:pi"]))


def test_one_sample_per_prompt_is_refused_up_front_with_the_override_that_allows_it(tmp_path):
    with pytest.raises(ValueError, match=r"group_size=1: advantage 'grpo' of recipe 'grpo' needs at least 2 samples.*"
                                         r"--set recipe_overrides.advantage:grpo.allow_singletons=true"):
        Trainer(make_config("smoke", recipe="grpo", **{**TINY, "group_size": 1}), tmp_path, progress=False)
    assert not tmp_path.joinpath("config.json").exists()
    allowed = make_config("smoke", recipe="grpo", **{**TINY, "group_size": 1,
                                                     "recipe_overrides": {"advantage:grpo": {"allow_singletons": True}}})
    Trainer(allowed, tmp_path, progress=False)
    Trainer(make_config("smoke", recipe="ppo", **{**TINY, "group_size": 1}), tmp_path, progress=False)  # a critic


# ------------------------------------------------------------------------------ a controller driving a whole component

class Bounds:
    """A controller of two PPO bounds at once: both widen by 0.1 per step (into="objective:ppo-clip")."""

    @staticmethod
    def init(*, initial):
        return {"eps_low": initial["eps_low"], "eps_high": initial["eps_high"], "label": "not logged"}

    @staticmethod
    def update(state, batch, metrics):
        return {**state, "eps_low": state["eps_low"] + 0.1, "eps_high": state["eps_high"] + 0.1}

    @staticmethod
    def value(state):
        return {"eps_low": state["eps_low"], "eps_high": state["eps_high"]}


@pytest.fixture
def bounds_controller():
    registry.register("controller", "probe-bounds", title="probe", summary="two bounds", family="pipeline")(Bounds)
    yield
    registry._REGISTRY["controller"].pop("probe-bounds")


def test_a_controller_may_drive_several_parameters_of_one_component(bounds_controller):
    recipe = Recipe(key="r", title="t", summary="s", advantage=["grpo"], objective=use("ppo-clip", eps_high=0.28),
                    controllers=[use("probe-bounds", into="objective:ppo-clip")])
    pipeline = Pipeline(recipe, track_kl=False)
    objective = pipeline.find("objective:ppo-clip")
    assert pipeline.kwargs(objective, 0, 1) == {"eps_low": 0.2, "eps_high": 0.28}  # starts from recipe + defaults
    pipeline.after_step(None, {}, step_context())
    assert pipeline.kwargs(objective, 1, 1) == pytest.approx({"eps_low": 0.3, "eps_high": 0.38})
    assert pipeline.driven_metrics(1, 1) == pytest.approx({"objective:ppo-clip.eps_low": 0.3,
                                                           "objective:ppo-clip.eps_high": 0.38})


def test_a_whole_component_controller_must_return_parameters_the_component_takes(bounds_controller, monkeypatch):
    recipe = Recipe(key="r", title="t", summary="s", advantage=["grpo"],
                    controllers=[use("probe-bounds", into="objective:ppo-clip")])
    pipeline = Pipeline(recipe, track_kl=False)
    monkeypatch.setattr(Bounds, "value", staticmethod(lambda state: {"eps_hi": 0.3}))
    with pytest.raises(ValueError, match=r"sets \['eps_hi'\], which objective:ppo-clip does not take"):
        pipeline.kwargs(pipeline.find("objective:ppo-clip"), 0, 1)
    monkeypatch.setattr(Bounds, "value", staticmethod(lambda state: 0.3))
    with pytest.raises(ValueError, match=r"must return \{param: value\}"):
        pipeline.kwargs(pipeline.find("objective:ppo-clip"), 0, 1)
