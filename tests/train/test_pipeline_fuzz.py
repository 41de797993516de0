"""Fuzz: random values for every registered component's settings, through the recipe overrides a user writes. Each is
refused when the recipe is built with one message naming the setting, before the run folder exists, or it trains
(a sample of the accepted ones runs a step on the tiny model). Never another exception, never a hang."""
import math
import random
import signal

import pytest

from tests.helpers import TINY, run_task, task_for
from workbench import registry
from workbench.recipes import RECIPES, with_overrides
from workbench.stages import SINGLE
from workbench.train import Trainer, make_config
from workbench.train.pipeline import PIPELINE_ARGUMENTS, Pipeline

VALUES = ("abc", "", True, False, None, -1e9, -5, -1, 0, 0.5, 1, 3, 1e9, math.nan, math.inf, [1, 2], {"a": 1})


def component_uses() -> list[tuple[str, str, str, str, dict]]:
    """(recipe, override key, kind, component key, its defaults) for each registered component a recipe uses, once."""
    seen, out = set(), []
    for name, recipe in sorted(RECIPES.items()):
        uses = list(recipe.uses())
        for kind, u in uses:
            slot = next(s for s, k in registry_slots().items() if k == kind)
            twice = sum(k == kind and v.key == u.key for k, v in uses) > 1  # an override cannot pick one of two
            if (kind, u.key) in seen or ":" in u.key or twice:
                continue
            seen.add((kind, u.key))
            target = slot if slot in SINGLE else f"{slot}:{u.key}"
            out.append((name, target, kind, u.key, registry.get(kind, u.key).defaults))
    return out


def registry_slots() -> dict:
    from workbench.stages import SLOTS

    return SLOTS


def cases(n: int, seed: int = 0) -> list[tuple]:
    """n (recipe, override key, kind, key, setting, value) draws: a setting of the component (or a misspelt name)
    and a value from VALUES."""
    rng, uses = random.Random(seed), component_uses()
    out = []
    for _ in range(n):
        recipe, target, kind, key, defaults = rng.choice(uses)
        names = [k for k in defaults if k not in PIPELINE_ARGUMENTS] + ["not_a_setting"]
        out.append((recipe, target, kind, key, rng.choice(names), rng.choice(VALUES)))
    return out


class Hang(Exception):
    pass


def within(seconds: int):
    def alarm(signum, frame):
        raise Hang(f"no answer within {seconds} s")
    signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)


def test_every_setting_is_refused_naming_it_or_builds(tmp_path):
    accepted = refused = 0
    for recipe, target, kind, key, name, value in cases(600):
        overrides = {target: {name: value}}
        within(10)
        try:
            Pipeline(with_overrides(RECIPES[recipe], overrides))
            accepted += 1
        except ValueError as err:
            refused += 1
            assert name in str(err), (recipe, overrides, str(err))
        finally:
            signal.alarm(0)
    assert accepted > 50 and refused > 300, (accepted, refused)


def test_a_refused_setting_leaves_no_run_folder(tmp_path):
    for i, (recipe, target, kind, key, name, value) in enumerate(cases(40, seed=1)):
        config = make_config("smoke", recipe=recipe, recipe_overrides={target: {name: value}})
        try:
            Pipeline(with_overrides(RECIPES[recipe], {target: {name: value}}))
            continue
        except ValueError:
            pass
        with pytest.raises(ValueError, match=name):
            Trainer(config, tmp_path / str(i))
        assert not (tmp_path / str(i)).exists()


def accepted_cases(n: int, seed: int) -> list[tuple]:
    """n draws the pipeline accepts with a value other than the default (what a user changed)."""
    out = []
    for case in cases(3000, seed):
        recipe, target, kind, key, name, value = case
        if RECIPES[recipe].objective.key == "preference" or registry.get(kind, key).defaults.get(name) == value:
            continue
        try:
            Pipeline(with_overrides(RECIPES[recipe], {target: {name: value}}))
        except ValueError:
            continue
        out.append(case)
        if len(out) == n:
            break
    return out


@pytest.mark.parametrize("case", accepted_cases(12, seed=2), ids=lambda c: f"{c[0]}-{c[4]}={c[5]!r}")
def test_an_accepted_setting_trains(case, tmp_path):
    recipe, target, kind, key, name, value = case
    overrides, task = task_for(recipe, **{**TINY, "steps": 1, "checkpoint_every": 1, "eval_size": 4})
    config = make_config("smoke", recipe=recipe, recipe_overrides={target: {name: value}}, **overrides)
    within(120)
    try:
        run_task(config, tmp_path / "run", task=task)
    finally:
        signal.alarm(0)
