"""The name -> task lookup."""
from __future__ import annotations

import pytest

from workbench.tasks import get_task, task_names


def test_registry():
    assert task_names() == ["act", "addition", "calculator", "countdown", "gridworld", "keydoor", "screen", "search"]
    assert get_task("addition", digits=3).digits == 3
    with pytest.raises(ValueError, match=r"unknown task 'nope'.*addition, calculator, countdown"):
        get_task("nope")
