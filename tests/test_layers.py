"""Imports point downward only. The layers, bottom to top: the core (the batch, masked ops, the registry, the step
context, the stage order, episodes, paths and files, KL estimators), the catalog (pure components and the text helpers they share
with the environments), then everything else (environments and tasks, rollout, trainer, recipes, figures, book).
Every `import` of every module is read with `ast`, those inside functions included, so a lazy import cannot hide
an upward dependency. (The registry loads the component packages by name, `importlib.import_module` in
`registry._load_all`, at the first lookup: that is how registration works, not an import of code it uses.)"""
from __future__ import annotations

import ast
from pathlib import Path

import workbench

ROOT = Path(workbench.__file__).parent
CORE = {"", "batch", "ops", "registry", "params", "probe", "stages", "context", "episodes", "paths", "files",
        "kl"}  # "": the package itself
CATALOG = {"advantages", "objectives", "regularizers", "rewards", "preference", "masks", "values", "weights", "text"}
LAYERS = ("core", "catalog", "above the catalog")


def layer(module: str) -> int:
    """0 core, 1 catalog, 2 anything else in workbench (a new top-level module counts as above until placed)."""
    top = module.split(".")[1] if "." in module else ""
    return 0 if top in CORE else 1 if top in CATALOG else 2


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(source: str, module: str, is_package: bool = False) -> list[tuple[int, str]]:
    """(line, imported module) for every workbench import in `source`, at any depth; `from workbench import x`
    counts as importing workbench.x, and relative imports are resolved against `module`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".")[:len(module.split(".")) - node.level + is_package]
                base = ".".join(package + ([node.module] if node.module else []))
            names = [f"{base}.{alias.name}" for alias in node.names] if base == "workbench" else [base]
            found += [(node.lineno, name) for name in names]
    return [(line, name) for line, name in found if name == "workbench" or name.startswith("workbench.")]


def upward_imports(source: str, module: str, is_package: bool = False) -> list[str]:
    """One line per import of `module` from a higher layer, for a core or catalog module (above: nothing to
    check, they may import anything below)."""
    own = layer(module)
    return [f"{module} (line {line}, {LAYERS[own]}) imports {name} ({LAYERS[layer(name)]})"
            for line, name in imports(source, module, is_package) if own < 2 and layer(name) > own]


def test_the_core_and_the_catalog_import_only_from_their_layer_or_below():
    bad = [line for path in sorted(ROOT.rglob("*.py"))
           for line in upward_imports(path.read_text(), module_name(path), path.name == "__init__.py")]
    assert not bad, "imports that point upward (move the shared helper down, e.g. to workbench.text):\n" + \
        "\n".join(bad)


def test_the_layers_cover_the_package_as_the_readme_draws_it():
    assert [layer(m) for m in ("workbench.ops", "workbench.episodes", "workbench.rewards.ssl", "workbench.text",
                               "workbench.envs.calculator", "workbench.tasks", "workbench.viz.agents")] == \
        [0, 0, 1, 1, 2, 2, 2]
    assert {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists()} >= CATALOG


def test_an_upward_import_is_named_even_inside_a_function_or_relative():
    source = ("from workbench import ops, envs\n"
              "def f():\n"
              "    from workbench.tasks.countdown import evaluate\n"
              "    from ..rollout.engine import left_pad\n"
              "    from .base import check_rewards\n")
    assert upward_imports(source, "workbench.rewards.ssl") == [
        "workbench.rewards.ssl (line 1, catalog) imports workbench.envs (above the catalog)",
        "workbench.rewards.ssl (line 3, catalog) imports workbench.tasks.countdown (above the catalog)",
        "workbench.rewards.ssl (line 4, catalog) imports workbench.rollout.engine (above the catalog)"]
    assert upward_imports("import workbench.rewards.base\n", "workbench.ops") == [
        "workbench.ops (line 1, core) imports workbench.rewards.base (catalog)"]
    assert upward_imports("from . import base\n", "workbench.rewards", is_package=True) == []
    assert upward_imports("from workbench.rewards import base\n", "workbench.envs.search") == []
