"""Every registration read from the source with `ast`, without importing a component: kind, key, summary, family,
confidence and where it is registered (file and line). `workbench list` prints it in well under a second, where
`registry.entries()` imports every component, torch and transformers with them (about 10 s on a 2-core machine).

Two forms register, and both are read (tests/test_registrations.py checks that what is read equals the registry,
entry by entry):

    @registry.advantage("grpo", title=..., summary=..., ...)    a decorated function or class; the key may be a
    def grpo(batch, *, eps=1e-6): ...                            module-level string constant (KEY = "fapo")
    define(Recipe(key="grpo", title=..., summary=..., ...))     a recipe (`workbench.recipes.base.define`)

A string is a literal, a module-level constant, a constant imported from another workbench module
(`from workbench.tasks.guidance import TOY_SOLUTION`), or a sum of those ("..." + TOY_SOLUTION).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from workbench import registry
from workbench.paths import ROOT

RECIPE_CLASSES = ("Recipe",)
RECIPE_FAMILY = "canonical"  # the family `recipes.base.define` registers every recipe under


@dataclass(frozen=True)
class Registration:
    kind: str
    key: str
    summary: str
    family: str
    confidence: str
    path: str  # from the repository root: "workbench/advantages/group.py"
    line: int  # where the registration starts (a decorated definition's first decorator, as `inspect` counts)

    @property
    def source(self) -> str:
        return f"{self.path}:{self.line}"


def registering_files(root: Path = ROOT) -> list[Path]:
    """The files whose import registers components (`registry.REGISTERING`: a package's modules, or one module)."""
    files = []
    for name in registry.REGISTERING:
        package, module = root / "workbench" / name, root / "workbench" / f"{name}.py"
        files += sorted(package.glob("*.py")) if package.is_dir() else [module] if module.is_file() else []
    return files


def read(root: Path = ROOT) -> list[Registration]:
    """Every registration under `root`, in the order of `registry.entries()` (kind in pipeline order, then key)."""
    found = [r for path in registering_files(root) for r in file_registrations(path, root)]
    order = {kind: i for i, kind in enumerate(registry.KINDS)}
    return sorted(found, key=lambda r: (order[r.kind], r.key))


def file_registrations(path: Path, root: Path = ROOT) -> list[Registration]:
    text = path.read_text(encoding="utf-8")
    if "registry." not in text and "define(" not in text:  # most files: no need to parse them
        return []
    tree = ast.parse(text, filename=str(path))
    module = ModuleSource(path.relative_to(root).as_posix(), tree)
    found = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            line = node.decorator_list[0].lineno if node.decorator_list else node.lineno
            found += [module.registration(registry_kind(d), d.args[0] if d.args else None, d.keywords, line)
                      for d in node.decorator_list if registry_kind(d)]
        elif (recipe := defined_recipe(node)) is not None:
            key = next((k.value for k in recipe.keywords if k.arg == "key"), None)
            found.append(module.registration("recipe", key, recipe.keywords, node.lineno, family=RECIPE_FAMILY))
    return found


def imported_module(module: str) -> "ModuleSource":
    """The parsed source of `workbench.x.y` (for the constants a registration imports from it)."""
    path = ROOT.joinpath(*module.split(".")).with_suffix(".py")
    return ModuleSource(path.relative_to(ROOT).as_posix(), ast.parse(path.read_text(encoding="utf-8")))


def registry_kind(node: ast.expr) -> str | None:
    """The kind of a `@registry.<kind>(...)` decorator; None for any other."""
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in registry.KINDS
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "registry"):
        return node.func.attr
    return None


def defined_recipe(node: ast.stmt) -> ast.Call | None:
    """The `Recipe(...)` call of a module-level `define(Recipe(...))` (or `X = define(...)`); None otherwise."""
    call = node.value if isinstance(node, (ast.Expr, ast.Assign)) else None
    if (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "define" and call.args
            and isinstance(recipe := call.args[0], ast.Call) and isinstance(recipe.func, ast.Name)
            and recipe.func.id in RECIPE_CLASSES):
        return recipe
    return None


class ModuleSource:
    """One parsed module: its path and its module-level constants, which a registration may name (KEY = "fapo")."""

    def __init__(self, path: str, tree: ast.Module):
        self.path = path
        self.constants = {target.id: node.value for node in tree.body if isinstance(node, ast.Assign)
                          for target in node.targets if isinstance(target, ast.Name)}
        self.imported = {alias.asname or alias.name: (node.module, alias.name) for node in tree.body
                         if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("workbench.")
                         for alias in node.names}

    def value(self, node: ast.expr | None, what: str, line: int) -> str:
        """A string the registration writes (module docstring: literals, constants and their sums)."""
        try:
            value = self.evaluate(node)
        except (ValueError, TypeError, SyntaxError, OSError):
            value = None
        if not isinstance(value, str):
            raise ValueError(f"{self.path}:{line}: the {what} of this registration cannot be read without running "
                             "the module (workbench list reads the source); write it as a string literal, a "
                             "module-level string constant or a sum of those")
        return value

    def evaluate(self, node: ast.expr | None):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self.evaluate(node.left) + self.evaluate(node.right)
        if isinstance(node, ast.Name) and node.id in self.constants:
            return self.evaluate(self.constants[node.id])
        if isinstance(node, ast.Name) and node.id in self.imported:
            module, name = self.imported[node.id]
            other = imported_module(module)
            return other.evaluate(ast.Name(name))
        return ast.literal_eval(node)

    def registration(self, kind: str, key_node, keywords: list[ast.keyword], line: int,
                     family: str | None = None) -> Registration:
        given = {k.arg: k.value for k in keywords if k.arg}
        key = self.value(key_node, "key", line)
        labels = {name: self.value(given[name], name, line) if name in given else None
                  for name in ("family", "confidence")}
        family, confidence = registry.catalog_labels(key, family or labels["family"], labels["confidence"])
        return Registration(kind, key, self.value(given.get("summary"), "summary", line), family, confidence,
                            self.path, line)
