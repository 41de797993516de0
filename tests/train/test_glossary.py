"""The metric glossary (workbench.train.glossary), gathered from what each component declares it logs (`logs=` in
its registration) and from the loop's own tables: every metric has a definition and a healthy-curve note, and every
metric an objective, regularizer, value loss, loss weight or preference loss returns is declared by that component.

That every metric a recipe logs is declared is checked on real runs in tests/train/test_trainer.py and
tests/train/test_pipeline.py.
"""
import ast
import dataclasses
import inspect
import re
from collections import defaultdict

import pytest
import torch

from tests.advantages.step_batches import episode_batch
from workbench import ops, registry
from workbench.batch import RolloutBatch
from workbench.context import Forward, Head
from workbench.recipes import get_recipe, use
from workbench.train import glossary
from workbench.train.glossary import GLOSSARY, HEALTHY, declarations, unexplained
from workbench.train.pipeline import Pipeline

D = torch.float64


def test_every_glossary_key_has_a_healthy_note_and_no_note_is_orphaned():
    assert set(HEALTHY) == set(GLOSSARY), {"no note": sorted(set(GLOSSARY) - set(HEALTHY)),
                                           "not in the glossary": sorted(set(HEALTHY) - set(GLOSSARY))}
    assert list(HEALTHY) == list(GLOSSARY), "HEALTHY follows GLOSSARY's order"


@pytest.mark.parametrize("table", ["GLOSSARY", "HEALTHY"])
def test_every_entry_is_a_non_empty_line_of_plain_text(table):
    for key, text in getattr(glossary, table).items():
        assert isinstance(text, str) and text.strip(), f"{table}[{key!r}] is empty"
        assert text == text.strip() and "\n" not in text, f"{table}[{key!r}] is not one line of text"
        assert "(no note yet)" not in text and "TODO" not in text, f"{table}[{key!r}] is a placeholder"


def test_healthy_notes_stay_short():
    long = {key: len(note) for key, note in HEALTHY.items() if len(note) > 240}
    assert not long, f"healthy-curve notes should be one or two sentences: {long}"


NAMESPACES = {key.split("/")[0] for key in GLOSSARY if "/" in key}  # reward, clip, mismatch, ...


def named_metrics(text: str) -> set[str]:
    """What a note refers to as a metric: anything in backticks, and plain names in a metric namespace
    ("clip/region"; not "pi_theta/pi_old" or "1/(2 beta)")."""
    plain = re.findall(r"(?<![\w/])([a-z][a-z_]*/[a-z_][\w-]*)", text)
    return set(re.findall(r"`([^`]+)`", text)) | {name for name in plain if name.split("/")[0] in NAMESPACES}


def test_metrics_a_note_refers_to_are_glossary_keys():
    for table in (GLOSSARY, HEALTHY):
        for key, text in table.items():
            unknown = sorted(named_metrics(text) - set(GLOSSARY))
            assert not unknown, f"{key!r} refers to metrics that are not in the glossary: {unknown}"


def test_the_reference_check_catches_a_misspelt_metric():
    assert named_metrics("Equal to `clip/region`; compare with clip/regoin and pi_theta/pi_old.") == {
        "clip/region", "clip/regoin"}


def test_metrics_module_no_longer_holds_the_glossary():
    from workbench.train import metrics

    assert not hasattr(metrics, "GLOSSARY") and not hasattr(metrics, "HEALTHY")


# ---------------------------------------------------------------------------------------------- gathered declarations


def test_the_glossary_is_exactly_the_declared_metrics():
    declared = [m.name for _, m in declarations()]
    assert list(GLOSSARY) == list(dict.fromkeys(declared))
    assert not unexplained(n for n in declared if "<" not in n)
    assert unexplained({"clip/regoin", "rewards/a/b/mean", "kl_coeff"}) == {"clip/regoin", "rewards/a/b/mean",
                                                                             "kl_coeff"}


def test_no_two_declarations_give_one_metric_different_texts():
    texts = defaultdict(dict)
    for who, m in declarations():
        texts[m.name][who] = (m.measures, m.healthy)
    differ = {name: sorted(by) for name, by in texts.items() if len(set(by.values())) > 1}
    assert not differ, f"metrics declared with different texts (use one shared constant): {differ}"
    shared = {name for name, by in texts.items() if len(by) > 1}
    assert {"clip/high", "kl", "value/loss", "rewards/chosen", "pairs"} <= shared  # the shared constants are used


def test_a_metric_declared_twice_with_different_texts_is_refused_naming_both(monkeypatch):
    clash = [("objective:a", registry.Metric("x/y", "one", "fine")), ("objective:b", registry.Metric("x/y", "two",
                                                                                                      "fine"))]
    monkeypatch.setattr(glossary, "declarations", lambda: clash)
    with pytest.raises(ValueError, match=r"'x/y' is declared by objective:a and by objective:b with different texts"):
        glossary.gather.__wrapped__()


def test_a_placeholder_stands_for_exactly_one_path_segment():
    per_reward = registry.Metric("rewards/<name>/mean", "m", "h")
    assert per_reward.matches("rewards/format-reward#2/mean") and per_reward.matches("rewards/task/mean")
    assert not per_reward.matches("rewards/a/b/mean") and not per_reward.matches("rewards//mean")
    assert not per_reward.matches("rewards/task/std") and not registry.Metric("a.b", "m", "h").matches("a-b")
    assert not unexplained({"rewards/task/mean", "rewards/format-reward/std"})
    assert all(glossary.PER_REWARD.fullmatch(f"rewards/x/{s}") for s in ("mean", "std"))


def test_the_glossary_module_declares_no_metric_itself():
    """A new metric is declared where it is logged: no metric name is written in glossary.py."""
    source = inspect.getsource(glossary)
    literals = {node.value for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Constant)}
    assert not literals & set(GLOSSARY)


# ---------------------------------------------------------------------------------------------- each component's own


def minibatch(seed=0, V=11, H=4) -> RolloutBatch:
    """Five multi-turn rows in two groups with every field an objective, regularizer, value loss or loss weight
    reads: log-probs from a random LM head (`head`), the rollout engine's, the reference's, advantages, critic
    values and targets."""
    g = torch.Generator().manual_seed(seed)
    b = episode_batch([[2, 3, 2], [3, 2], [2, 2, 4, 2], [4], [1, 3]], seed=seed, group=[0, 0, 1, 1, 1])
    B, T = b.mask.shape
    b.head = Head(hidden=torch.randn(B, T, H, generator=g, dtype=D), weight=torch.randn(V, H, generator=g, dtype=D),
                  bias=None, trained=True, lr=0.05, betas=(0.9, 0.999), eps=1e-8, temperature=1.0)
    b.response_ids = torch.randint(0, V, (B, T), generator=g)
    logits = b.head.hidden @ b.head.weight.T
    vocab_logp = torch.log_softmax(logits, -1)
    b.logp = vocab_logp.gather(-1, b.response_ids[..., None]).squeeze(-1)
    b.old_logp = b.logp + 0.1 * torch.randn(B, T, generator=g, dtype=D)
    b.mu_logp = b.old_logp + 0.05 * torch.randn(B, T, generator=g, dtype=D)
    b.ref_logp = b.old_logp - 0.1 * torch.rand(B, T, generator=g, dtype=D)
    b.old_vocab_mean_logp, b.ref_argmax = vocab_logp.mean(-1), logits.argmax(-1)
    b.entropy = torch.rand(B, T, generator=g, dtype=D) * b.mask
    b.advantages = torch.randn(B, 1, generator=g, dtype=D).expand(B, T) * b.mask
    b.target_adv = torch.randn(B, 1, generator=g, dtype=D).expand(B, T) * b.mask
    b.offpolicy_mask = (torch.arange(B) % 3 == 0).to(D)[:, None] * b.mask
    b.task_value = 0.25 * torch.rand(B, generator=g, dtype=D)
    b.returns, b.value_mask = torch.randn(B, T, generator=g, dtype=D) * b.mask, b.mask.clone()
    b.logits, b.route = logits, torch.arange(B) % 3  # SRPO: the live logits, rows 0 GRPO / 1 SDPO / 2 fallback
    b.teacher_logp = torch.log_softmax(torch.randn(B, T, V, generator=g, dtype=D), -1) * b.mask[..., None]
    b.teacher_entropy = torch.rand(B, T, generator=g, dtype=D) * b.mask
    return b


# Parameters under which a component logs more than with its defaults: the dual-clip cap (clip/dual), ROVER's clip.
VARIANTS = {"rover": [{"use_rover_clip": True}], "online-dpo": [{"loss_type": "ipo"}]}


def settings(entry: registry.Entry) -> list[dict]:
    dual = [{"dual_clip_c": 3.0}] if "dual_clip_c" in entry.defaults and entry.defaults["dual_clip_c"] is None else []
    return [{}, *dual, *VARIANTS.get(entry.key, [])]


def logged(entry: registry.Entry, mb: RolloutBatch, kw: dict) -> dict:
    """The metrics dict `entry` returns on minibatch `mb` with parameters `kw`, called as the pipeline calls it."""
    denom = ops.Denominators.of(mb.mask)
    if entry.kind == "objective":
        inputs = {name: getattr(mb, name) for name in entry.reads_with(kw)}
        agg = entry.defaults.get("agg", "token-mean")
        return entry.fn(mb.logp, mb.old_logp, mb.advantages, mb.mask, agg=agg, denom=denom, **kw, **inputs)[1]
    if entry.kind == "regularizer":
        return entry.fn(Forward(logp=mb.logp, entropy=mb.entropy), mb, agg="token-mean", denom=denom, **kw)[1]
    if entry.kind == "value":
        return entry.fn(mb.values, mb, agg="token-mean", denom=denom, **kw)[1]
    return entry.fn(mb, **kw)[1]  # a loss weight


LOSS_TERMS = [e for kind in ("objective", "regularizer", "value", "loss_weight") for e in registry.entries(kind)
              if e.key != "preference"]  # the preference objective: below, with each loss it calls


@pytest.mark.parametrize("entry", LOSS_TERMS, ids=[f"{e.kind}:{e.key}" for e in LOSS_TERMS])
def test_a_loss_term_declares_exactly_the_metrics_it_logs(entry):
    mb = minibatch()
    returned = set().union(*(logged(entry, mb, kw) for kw in settings(entry)))
    undeclared = sorted(k for k in returned if not entry.declares(k))
    assert not undeclared, f"{entry.kind} {entry.key!r} logs {undeclared} without declaring them (logs=...)"
    assert {m.name for m in entry.logs} == returned, f"{entry.kind} {entry.key!r} declares metrics it never logs"


def preference_batch(K: int, N=3, T=5, seed=0) -> RolloutBatch:
    """N items of K ranked rows each (best first, one group per item) with every field a preference input reads."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(2, T + 1, (N * K,), generator=g)
    mask = (torch.arange(T)[None, :] < lengths[:, None]).to(D)
    b = RolloutBatch(response_ids=torch.zeros(N * K, T, dtype=torch.long), mask=mask,
                     group=torch.arange(N).repeat_interleave(K))
    b.logp = -torch.rand(N * K, T, generator=g, dtype=D) * mask
    b.ref_logp = b.logp - 0.1 * torch.rand(N * K, T, generator=g, dtype=D) * mask
    b.prev_logp = b.logp + 0.05 * torch.randn(N * K, T, generator=g, dtype=D) * mask
    b.preference_reward = torch.linspace(1.0, 0.0, K, dtype=D).repeat(N)
    b.winrate, b.step_value = torch.rand(N * K, generator=g, dtype=D), torch.rand(N * K, generator=g, dtype=D)
    b.step_advantage = torch.randn(N * K, generator=g, dtype=D)
    return b


PREFERENCE_RECIPES = [e.key for e in registry.entries("recipe") if get_recipe(e.key).objective.key == "preference"]


def test_every_preference_loss_is_trained_by_a_recipe():
    used = {get_recipe(key).objective.kw["loss"] for key in PREFERENCE_RECIPES}
    assert used == {e.key for e in registry.entries("preference")}


@pytest.mark.parametrize("recipe", PREFERENCE_RECIPES)
def test_a_preference_loss_declares_exactly_the_metrics_it_logs(recipe):
    """The preference objective on the recipe's items: loss/preference is the objective's, the rest the loss's."""
    use = get_recipe(recipe).objective
    objective, loss = registry.get("objective", "preference"), registry.get("preference", use.kw["loss"])
    K = {"one": 1, "list": 4}.get(loss.layout, 4 if get_recipe(recipe).rollout.key == "degraded-pairs" else 2)
    mb = preference_batch(K)
    returned = set()
    for extra in settings(loss):
        kw = {**use.kw, **extra}
        inputs = {name: getattr(mb, name) for name in objective.reads_with(kw)}
        returned |= set(objective.fn(mb.logp, None, None, mb.mask, **kw, **inputs)[1])
    own = {m.name for m in objective.logs}
    assert own <= returned and {m.name for m in loss.logs} == returned - own, (recipe, sorted(returned))


def test_every_token_mask_declares_the_share_of_rollouts_it_empties():
    """The pipeline logs filtered_frac/<key> for each token mask of a recipe (`Pipeline.mask_tokens`)."""
    for entry in registry.entries("token_mask"):
        assert [m.name for m in entry.logs] == [f"filtered_frac/{entry.key}"], entry.key


def test_every_controller_declares_exactly_the_values_the_pipeline_logs_for_it():
    """What a controller drives is logged as `<target>.<param>`, or by the run coefficient's name
    (`Pipeline.driven_metrics`); over every recipe that uses it (and adaptive-kl on kl-penalty's beta, as the CLI's
    --set does), it declares exactly those names."""
    recipes = [get_recipe(e.key) for e in registry.entries("recipe")]
    recipes.append(dataclasses.replace(get_recipe("grpo"), controllers=[use("adaptive-kl",
                                                                            into="regularizer:kl-penalty.beta")]))
    driven = defaultdict(set)
    for recipe in recipes:
        for controller in recipe.controllers:  # alone in the pipeline: the names it logs are its own
            alone = Pipeline(dataclasses.replace(recipe, controllers=[controller]))
            driven[controller.key] |= set(alone.driven_metrics(0, 10))
    for entry in registry.entries("controller"):
        assert {m.name for m in entry.logs} == driven[entry.key], entry.key
