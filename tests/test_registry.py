"""The registry: every component a catalog key, one signature per kind, registration metadata, clear errors."""
import pytest
import torch

from tests.helpers import D
from workbench import registry
from workbench.recipes import RECIPES


# The pipeline's own parts and the pieces of catalog methods that are components of their own (a typo in a
# catalog key would otherwise pass unnoticed, so they are listed here one by one).
NOT_IN_CATALOG = {
    ("sampler", "uniform"), ("rollout", "turns"), ("reference", "sft"), ("schedule", "mdpo-inv-t"),
    ("reward_shaping", "kl-in-reward"), ("group_transform", "greedy-baseline"), ("token_mask", "min-abs-advantage"),
    ("controller", "adaptive-kl"), ("env", "addition"), ("env", "countdown"), ("env", "calculator"), ("env", "search"),
    ("env", "gridworld"), ("env", "keydoor"), ("env", "screen"),
    ("rollout", "agents"), ("env", "kuhn"), ("env", "tictactoe"),  # the multi-agent games and the rollout playing them
    ("env", "spy"), ("env", "werewolf"), ("env", "search-propose"), ("env", "plan-act"),  # the F8 methods' games
    ("group_transform", "role-baseline"),  # SPIRAL's role-conditioned baseline (a multiagent baseline, not a key)
    ("reward", "length-bias"),  # a hackable proxy for notebook 12, not a method
    # the pipeline's preference parts: where items come from, the loss on them, the anchors that move
    ("sampler", "none"), ("objective", "preference"), ("loss_weight", "rollout-is"),
    ("sampler", "pool"),  # the fixed prompt pool the F5 data methods revisit (per-prompt statistics, replay)
    ("reference", "iterate"), ("reference", "previous-iterate"), ("reference", "momentum"),
    *(("rollout", key) for key in ("task-pairs", "file-pairs", "task-lists", "degraded-pairs", "advantage-steps",
                                   "sampled-pairs", "sampled-lists", "sibling-steps")),
}


def test_every_registered_component_is_a_catalog_key():
    catalog = registry.catalog()
    for entry in registry.entries():
        if entry.kind == "recipe" or (entry.kind, entry.key) in NOT_IN_CATALOG:
            continue
        assert entry.key in catalog, f"{entry.kind} {entry.key!r} is not in data/catalog.tsv"


def test_every_kind_has_one_signature_and_stateful_kinds_their_methods():
    assert set(registry.KINDS) >= {"reward", "reward_shaping", "advantage", "token_mask", "objective", "regularizer",
                                   "value", "rollout", "group_transform", "sampler", "buffer", "controller",
                                   "schedule", "env"}
    for kind, methods in registry.STATEFUL.items():
        for entry in registry.entries(kind):
            assert all(callable(getattr(entry.fn, m)) for m in methods), (kind, entry.key)
    with pytest.raises(TypeError, match=r"must define \['init', 'update', 'value'\]"):
        registry.controller("broken-controller", title="t", summary="s")(type("Broken", (), {}))


def test_every_recipe_is_built_from_registered_catalog_components():
    catalog = registry.catalog()
    for recipe in RECIPES.values():
        for kind, key in recipe.components():
            assert registry.get(kind, key) and (key in catalog or (kind, key) in NOT_IN_CATALOG), (recipe.key, kind, key)


def test_project_catalog_is_the_shared_one():
    from pathlib import Path

    shared = Path(__file__).resolve().parents[2] / "shared" / "catalog.tsv"
    if not shared.exists():
        pytest.skip(f"no shared catalog at {shared}")
    assert registry.data_file("catalog.tsv").read_text() == shared.read_text()


def test_unknown_keys_and_duplicates_get_clear_errors():
    with pytest.raises(KeyError, match="no advantage named .nope.; registered advantages: .*gae, .*grpo, "):
        registry.get("advantage", "nope")
    with pytest.raises(ValueError, match="unknown registry kind"):
        registry.get("optimizer", "adam")
    with pytest.raises(ValueError, match="registered twice"):
        registry.advantage("grpo", title="t", summary="s")(lambda batch: None)


@pytest.mark.parametrize("logs, problem", [
    ({"x/y": "what it measures"}, r"logs\['x/y'\] must be a pair \(what it measures, its healthy range"),
    ({"x/y": ("measures", "")}, r"logs\['x/y'\] holds ''; each text is one non-empty line"),
    ({"x/y": ("two\nlines", "healthy")}, r"logs\['x/y'\] holds 'two\\nlines'; each text is one non-empty line"),
    ({"": ("measures", "healthy")}, r"a metric name must be a non-empty string"),
])
def test_a_bad_metric_declaration_is_refused_before_anything_is_registered(logs, problem):
    with pytest.raises(ValueError, match=r"objective 'nope': " + problem):
        registry.objective("nope", title="t", summary="s", logs=logs)
    with pytest.raises(KeyError):
        registry.get("objective", "nope")


def test_a_component_declares_the_metrics_it_logs():
    ppo = registry.get("objective", "ppo-clip")
    assert ppo.declares("clip/high") and ppo.declares("clip/dual") and not ppo.declares("value/loss")
    clip_high = next(m for m in ppo.logs if m.name == "clip/high")
    assert clip_high.measures.startswith("Fraction of tokens with A > 0") and clip_high.healthy


KEYS = ["lipo", "p3o", "apo-accelerated", "brain", "spo-prefdeg", "refuel", "mcts-dpo", "direct-advantage-po", "salsa"]


@pytest.mark.covers(*KEYS)
def test_every_key_is_registered_as_preference_with_catalog_confidence():
    catalog = registry.catalog()
    kinds = {"salsa": "reference"}  # SALSA is a way to build the reference, not a pairwise loss
    for key in KEYS:
        entry = registry.get(kinds.get(key, "preference"), key)
        assert entry.confidence == catalog[key]["confidence"]
        assert entry.title == catalog[key]["title"] and entry.equation and entry.fn.__doc__
    assert registry.get("preference", "brain").confidence == "abstract-only"
    assert registry.get("preference", "lipo").defaults == {"beta": 0.1, "labels": None, "weights": "lambda"}
    assert registry.get("preference", "mcts-dpo").defaults["beta"] == 0.1
    assert registry.get("preference", "refuel").defaults["eta"] == 1.0
    assert registry.get("preference", "apo-accelerated").defaults["alpha"] == 0.3
    assert registry.get("preference", "spo-prefdeg").defaults["lam"] == 0.1


@pytest.mark.covers("gspo", "geo_mean", "luspo", "sapo", "cispo", "tis")
@pytest.mark.parametrize("key", ["gspo", "geo_mean", "luspo", "sapo", "cispo", "tis"])
def test_registered_with_equation_and_clear_input_errors(key):
    entry = registry.get("objective", key)
    assert entry.equation and entry.family == "canonical" and entry.fn.__doc__
    x = torch.zeros(2, 3, dtype=D)
    extra = {"mu_logp": x} if key == "tis" else {}
    with pytest.raises(ValueError, match="advantages has shape"):
        entry.fn(x, x, torch.zeros(2, 4, dtype=D), torch.ones(2, 3, dtype=D), **extra)
    with pytest.raises(ValueError, match="all zero"):
        entry.fn(x, x, x, torch.zeros(2, 3, dtype=D), **extra)
    with pytest.raises(ValueError, match="NaN"):
        entry.fn(x, x, torch.full((2, 3), float("nan"), dtype=D), torch.ones(2, 3, dtype=D), **extra)
