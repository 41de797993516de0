import json

import pytest

from workbench import cli, registry
from workbench.recipes import RECIPES


# The pipeline's own parts and the pieces of catalog methods that are components of their own (a typo in a
# catalog key would otherwise pass unnoticed, so they are listed here one by one).
NOT_IN_CATALOG = {
    ("sampler", "uniform"), ("rollout", "turns"), ("reference", "sft"), ("schedule", "mdpo-inv-t"),
    ("reward_shaping", "kl-in-reward"), ("group_transform", "greedy-baseline"), ("token_mask", "min-abs-advantage"),
    ("controller", "adaptive-kl"), ("env", "calculator"), ("env", "search"), ("env", "gridworld"),
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
    with pytest.raises(KeyError, match="no advantage named 'nope'; registered advantages: gae, "):
        registry.get("advantage", "nope")
    with pytest.raises(ValueError, match="unknown registry kind"):
        registry.get("optimizer", "adam")
    with pytest.raises(ValueError, match="registered twice"):
        registry.advantage("grpo", title="t", summary="s")(lambda batch: None)


def test_list_json_has_the_promised_fields(capsys):
    assert cli.main(["list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["key"] for r in rows} >= {"grpo", "rloo", "ppo-clip", "k3", "token-mean", "ppo"}
    for row in rows:
        assert {"key", "kind", "family", "title", "confidence"} <= set(row)
        assert row["family"] and row["confidence"] in ("exact", "partial", "abstract-only")


def test_list_missing_prints_unregistered_catalog_keys(capsys):
    assert cli.main(["list", "--missing"]) == 0
    printed = {line.split()[0] for line in capsys.readouterr().out.splitlines() if line.strip()}
    assert printed == set(registry.missing_keys())
    assert "grpo" not in printed and printed <= set(registry.catalog())


def test_cli_reports_bad_input_without_a_traceback(capsys, tmp_path):
    assert cli.main(["run", "grpo", "--set", "stepz=3", "--out", str(tmp_path / "r")]) == 2
    assert "unknown config key 'stepz'" in capsys.readouterr().err
    assert cli.main(["report", str(tmp_path)]) == 2
    assert "not a run folder" in capsys.readouterr().err
