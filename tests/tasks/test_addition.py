"""The addition task: format, verifier, held-out file."""
from __future__ import annotations

import random

import pytest

from workbench.tasks import Example, get_task
from workbench.tasks.base import EVAL_SIZE


def test_non_default_parameters_do_not_use_the_shipped_file():
    shipped = {e.prompt for e in get_task("addition").eval_set()}
    three = get_task("addition", digits=3)
    assert three.eval_file is None and len(three.eval_set()) == EVAL_SIZE
    assert not shipped & {e.prompt for e in three.eval_set()}
    assert len(get_task("addition", digits=1).eval_set()) == 20  # a fifth of the 100 prompts


def test_addition_format_and_wrong_answers():
    task = get_task("addition")
    ex = Example(prompt="12+34=", answer="46", target="46")
    assert task.make_example(random.Random(0)).prompt.endswith("=")
    assert task.score(" 46\n", ex) == 1.0
    for wrong in ["45", "47", "046", "46 46", "4 6", "", "forty-six", "46="]:
        assert task.score(wrong, ex) == 0.0, wrong


def test_digits_beyond_what_python_prints_are_refused():
    with pytest.raises(ValueError, match=r"addition: need 1 <= digits <= 4000, got digits=5000"):
        get_task("addition", digits=5000)
    with pytest.raises(ValueError, match=r"addition: wrong type for digits='3' \(str; need int\)"):
        get_task("addition", digits="3")
