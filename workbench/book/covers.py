"""Which tests check a catalog key: the `@pytest.mark.covers("KEY", ...)` marks of `tests/**/*.py`, read with `ast`
(nothing is imported, no test runs). The book's catalog cards and method finder list them, `workbench show KEY`
prints them."""
from __future__ import annotations

import ast
from pathlib import Path

from workbench.paths import ROOT

TESTS_DIR = ROOT / "tests"


def _covers_keys(node: ast.AST) -> list[str]:
    """Keys of every ``pytest.mark.covers(...)`` / ``mark.covers(...)`` call inside ``node``
    (a decorator, or the value of a ``pytestmark =`` assignment, possibly a list of marks)."""
    keys = []
    for sub in ast.walk(node):
        if not (isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute)
                and sub.func.attr == "covers"):
            continue
        owner = sub.func.value
        if (isinstance(owner, ast.Attribute) and owner.attr == "mark") or (
                isinstance(owner, ast.Name) and owner.id == "mark"):
            keys += [a.value for a in sub.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return keys


def _pytestmark_keys(body: list[ast.stmt]) -> list[str]:
    keys = []
    for stmt in body:
        if isinstance(stmt, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "pytestmark" for t in stmt.targets):
            keys += _covers_keys(stmt.value)
        elif (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
              and stmt.target.id == "pytestmark" and stmt.value is not None):
            keys += _covers_keys(stmt.value)
    return keys


def _decorator_keys(node) -> list[str]:
    return [k for d in node.decorator_list for k in _covers_keys(d)]


def collect_covers(tests_dir: Path = TESTS_DIR) -> dict[str, list[str]]:
    """Map catalog key -> ``["tests/test_x.py::test_y", ...]`` from ``@pytest.mark.covers`` marks.

    Reads ``tests_dir/**/*.py`` with ``ast`` (nothing is imported). A mark applies to the test function
    it decorates, to every test of a class it decorates (or of a class with ``pytestmark = ...``),
    and to every test of a module with ``pytestmark = pytest.mark.covers(...)`` (or a list of marks).
    """
    tests_dir = Path(tests_dir)
    found: dict[str, list[str]] = {}

    def add(keys, test_id):
        for key in keys:
            ids = found.setdefault(key, [])
            if test_id not in ids:
                ids.append(test_id)

    funcs = (ast.FunctionDef, ast.AsyncFunctionDef)
    for path in sorted(tests_dir.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        prefix = f"{tests_dir.name}/{path.relative_to(tests_dir).as_posix()}"
        module_keys = _pytestmark_keys(tree.body)
        for node in tree.body:
            if isinstance(node, funcs) and node.name.startswith("test"):
                add(module_keys + _decorator_keys(node), f"{prefix}::{node.name}")
            elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
                class_keys = module_keys + _decorator_keys(node) + _pytestmark_keys(node.body)
                for item in node.body:
                    if isinstance(item, funcs) and item.name.startswith("test"):
                        add(class_keys + _decorator_keys(item), f"{prefix}::{node.name}::{item.name}")
    return found


def tests_by_file(tests: list[str]) -> dict[str, list[str]]:
    """Test ids grouped by file: {"tests/x.py": ["test_a", "T::test_b[grpo]"]} (names keep their class and params)."""
    files: dict[str, list[str]] = {}
    for test_id in tests:
        path, _, name = test_id.partition("::")
        files.setdefault(path, []).append(name)
    return files


RECIPE_TESTS = "tests/recipes/"  # a recipe shares its key with a component ("grpo"): these files test recipes
EVERY_RECIPE_TESTS = {  # parametrized over every recipe of a kind (tests/book/test_covers.py checks they exist)
    "rl": ["tests/train/test_pipeline.py::test_every_recipe_trains_end_to_end_and_resumes_exactly"],
    "preference": ["tests/train/test_pipeline.py::test_every_preference_recipe_resumes_exactly"],
}


def entry_tests(entry, covers: dict[str, list[str]]) -> list[str]:
    """The tests that check an entry (its catalog card lists them, `workbench show` prints them): a recipe's own
    (tests/recipes/ marked with its key, and the tests every recipe of its kind runs, as `id[key]`); a component's,
    never those of the recipe with the same key."""
    marked = covers.get(entry.key, [])
    if entry.kind != "recipe":
        return [t for t in marked if not t.startswith(RECIPE_TESTS)]
    kind = "preference" if entry.fn.objective.key == "preference" else "rl"  # a recipe entry holds the recipe
    every = [f"{t}[{entry.key}]" for t in EVERY_RECIPE_TESTS[kind]]
    return [t for t in marked if t.startswith(RECIPE_TESTS)] + every
