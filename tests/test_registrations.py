"""The registrations read from the source are the registry's, entry by entry, with the line `inspect` finds; a
registration that cannot be read without running its module is refused, naming it and the fix."""
import inspect
import textwrap
from pathlib import Path

import pytest

from workbench import registrations, registry
from workbench.paths import ROOT


def test_what_is_read_is_what_the_registry_holds():
    read = {(r.kind, r.key): r for r in registrations.read()}
    entries = registry.entries()
    assert list(read) == [(e.kind, e.key) for e in entries]  # the same entries, in the same order
    for e in entries:
        r = read[e.kind, e.key]
        assert (r.summary, r.family, r.confidence) == (e.summary, e.family, e.confidence), e.key
        if e.kind != "recipe":  # a recipe is data: `inspect` finds no code for it
            fn = inspect.unwrap(e.fn)
            assert Path(inspect.getsourcefile(fn)).resolve() == ROOT / r.path, e.key
            assert inspect.getsourcelines(fn)[1] == r.line, e.key


def write(root: Path, name: str, text: str) -> None:
    path = root / "workbench" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


def test_both_forms_are_read_with_constants_labels_and_lines(tmp_path):
    write(tmp_path, "advantages/toy.py", '''
        from dataclasses import dataclass
        from workbench import registry
        KEY = "toy-advantage"
        NOTE = "a constant that is not a registration"


        @registry.advantage(KEY, title="T", summary="mean " "baseline")
        def toy(batch): ...


        @dataclass(frozen=True)
        @registry.controller("toy-controller", title="T", summary="keeps state", family="entropy",
                             confidence="partial")
        class Toy: ...
        ''')
    write(tmp_path, "recipes/toy.py", '''
        from workbench.recipes.base import Recipe, define

        define(Recipe(key="toy-recipe", title="T", summary="one loss", objective="ppo-clip"))
        helper = define  # not a registration
        ''')
    write(tmp_path, "kl.py", "x = 1\n")
    read = registrations.read(tmp_path)
    assert [(r.kind, r.key, r.summary, r.family, r.confidence, r.source) for r in read] == [
        ("advantage", "toy-advantage", "mean baseline", "", "exact", "workbench/advantages/toy.py:8"),
        ("controller", "toy-controller", "keeps state", "entropy", "partial", "workbench/advantages/toy.py:12"),
        ("recipe", "toy-recipe", "one loss", "canonical", "exact", "workbench/recipes/toy.py:4"),
    ]


def test_a_registration_that_needs_running_is_refused_naming_it(tmp_path):
    write(tmp_path, "rewards/computed.py", '''
        from workbench import registry

        @registry.reward("computed", title="T", summary=" ".join(["made", "at", "import"]))
        def computed(completions): ...
        ''')
    with pytest.raises(ValueError, match=r"workbench/rewards/computed\.py:4: the summary of this registration cannot "
                                         r"be read .* write it as a string literal, a module-level string constant or "
                                         r"a sum of those"):
        registrations.read(tmp_path)


def test_a_summary_may_add_constants_of_its_module_and_of_other_workbench_modules(tmp_path):
    write(tmp_path, "rewards/summed.py", '''
        from workbench import registry
        from workbench.tasks.guidance import TOY_CRITIQUE as CRITIQUE

        OWN = " Own."

        @registry.reward("summed", title="T", summary="Start." + OWN + CRITIQUE)
        def summed(completions): ...
        ''')
    from workbench.tasks.guidance import TOY_CRITIQUE

    [found] = registrations.read(tmp_path)
    assert found.summary == "Start. Own." + TOY_CRITIQUE
