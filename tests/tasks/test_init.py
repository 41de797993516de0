"""The name -> task lookup: the registry's "env" kind, the one place a task name is looked up."""
from __future__ import annotations

import pytest

from workbench import registry
from workbench.tasks import get_task, task_names


def test_registry():
    assert task_names() == ["act", "addition", "calculator", "countdown", "gridworld", "keydoor", "screen", "search"]
    assert get_task("addition", digits=3).digits == 3
    with pytest.raises(ValueError, match=r"unknown task 'nope'.*addition, calculator, countdown"):
        get_task("nope")


@pytest.mark.parametrize("name", task_names())
def test_every_name_builds_the_class_registered_under_it(name):
    task = get_task(name)
    assert type(task) is registry.get("env", name).fn and task.name == name
