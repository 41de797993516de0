"""The task protocol on the built-in tasks: verified targets, held-out sets, deterministic sampling."""
from __future__ import annotations

import random

import pytest

from workbench.tasks import get_task, task_names

BUILTIN_SPECS = [
    ("addition", {}),
    ("addition", {"digits": 1}),
    ("addition", {"digits": 3}),
    ("countdown", {}),
    ("countdown", {"n_numbers": 4, "max_number": 12}),
]
SPEC_IDS = [f"{name}{kwargs or ''}" for name, kwargs in BUILTIN_SPECS]


@pytest.fixture(params=BUILTIN_SPECS, ids=SPEC_IDS)
def task(request):
    name, kwargs = request.param
    return get_task(name, **kwargs)


def printable(text: str) -> bool:
    return all(32 <= ord(c) <= 126 for c in text)


def test_sft_targets_score_one(task):
    examples = task.sample(500, random.Random(0))
    assert task.rewards([e.target for e in examples], examples) == [1.0] * 500


def test_eval_targets_score_one(task):
    examples = task.eval_set()
    assert examples and len({e.prompt for e in examples}) == len(examples)
    assert all(task.score(e.target, e) == 1.0 for e in examples)


def test_sample_avoids_held_out(task):
    held_out = {e.prompt for e in task.eval_set()}
    assert not held_out & {e.prompt for e in task.sample(2000, random.Random(1))}


def test_sampling_is_deterministic(task):
    assert task.sample(50, random.Random(7)) == task.sample(50, random.Random(7))
    assert task.sample(50, random.Random(7)) != task.sample(50, random.Random(8))


@pytest.mark.parametrize("name", task_names())
def test_default_examples_are_short_printable_ascii(name):
    from workbench.envs.multiagent import GameTask

    task = get_task(name)
    for e in task.eval_set() + task.sample(500, random.Random(2)):
        assert printable(e.prompt) and printable(e.target) and printable(e.answer), e
        # a game's example holds a view of its deal (the spy game's scenes); the model's context check reads them
        assert (len(e.prompt) <= 20 or isinstance(task, GameTask)) and len(e.target) <= 12, e


def test_redraw_returns_the_first_success_and_gives_up_after_its_tries():
    from workbench.tasks.base import redraw

    draws = iter([None, None, 7, 8])
    assert redraw(lambda: next(draws), 3, "never") == 7
    with pytest.raises(RuntimeError, match="no luck"):
        redraw(lambda: None, 5, "no luck")
