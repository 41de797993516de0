"""The name -> task lookup: the registry's "env" kind, the one place a task name is looked up."""
from __future__ import annotations

import pytest

from workbench import registry
from workbench.envs.base import knob_kinds
from workbench.tasks import get_task, task_names


def test_registry():
    assert task_names() == ["act", "addition", "calculator", "countdown", "gridworld", "keydoor", "kuhn", "plan-act",
                            "screen", "search", "search-propose", "spy", "tictactoe", "werewolf"]
    assert get_task("addition", digits=3).digits == 3
    with pytest.raises(ValueError, match=r"unknown task 'nope'.*addition, calculator, countdown"):
        get_task("nope")


@pytest.mark.parametrize("name", task_names())
def test_every_name_builds_the_class_registered_under_it(name):
    task = get_task(name)
    assert type(task) is registry.get("env", name).fn and task.name == name


def test_a_near_miss_of_a_task_name_gets_a_did_you_mean():
    with pytest.raises(ValueError, match=r"unknown task 'gridwrold' \(did you mean 'gridworld'\?\); valid names: act"):
        get_task("gridwrold")
    with pytest.raises(ValueError, match=r"unknown task 'qwerty'; valid names"):  # nothing close: no guess
        get_task("qwerty")


@pytest.mark.parametrize("name", task_names())
def test_every_task_refuses_unknown_and_mistyped_knobs_with_a_message(name):
    """One check for every registered task, read off its constructor: a misspelled knob gets a did-you-mean and the
    list of knobs (not a TypeError from inside), a knob of the wrong type names knob, value and type."""
    knobs = list(knob_kinds(registry.get("env", name).fn))
    first = knobs[0]
    with pytest.raises(ValueError, match=rf"{name}: unknown task_kw key '{first}e' \(did you mean '{first}'[^)]*\?\); "
                                         rf"{name}'s knobs: {', '.join(knobs)}"):
        get_task(name, **{first + "e": 1})
    with pytest.raises(ValueError, match=rf"{name}: unknown task_kw key 'foo';"):
        get_task(name, foo=1)
    typed = next(k for k, knob in knob_kinds(registry.get("env", name).fn).items() if knob.types)
    with pytest.raises(ValueError, match=rf"{name}: wrong type for {typed}=\[1\] \(list; need"):
        get_task(name, **{typed: [1]})
