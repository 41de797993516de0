"""The reasoning-gym adapter."""
from __future__ import annotations

import random
import sys

import pytest

from workbench.tasks import get_task


def test_reasoning_gym_missing_package_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "reasoning_gym", None)  # makes `import reasoning_gym` fail
    with pytest.raises(ImportError, match=r"pip install reasoning-gym"):
        get_task("reasoning_gym:leg_counting", size=20)


def test_reasoning_gym_end_to_end():
    pytest.importorskip("reasoning_gym", reason="reasoning-gym not installed: pip install -e '.[tasks]'")
    task = get_task("reasoning_gym:leg_counting", size=20, seed=3)
    assert task.name == "reasoning_gym:leg_counting"
    held_out = task.eval_set()
    assert len(held_out) == 4 and task.eval_set(2) == held_out[:2]
    train = task.sample(30, random.Random(0))
    assert not {e.prompt for e in held_out} & {e.prompt for e in train}
    assert task.sample(5, random.Random(1)) == task.sample(5, random.Random(1))
    for e in held_out + train[:5]:
        assert task.score(e.target, e) == 1.0
        assert task.score(f" {e.answer}\n", e) == 1.0
        assert task.score(str(int(e.answer) + 1), e) < 1.0
        assert task.score("junk \x00" * 1000, e) < 1.0
    with pytest.raises(ValueError, match="unknown reasoning-gym dataset"):
        get_task("reasoning_gym:no_such_dataset")


@pytest.mark.parametrize("dataset, kw, message", [
    ("leg_countin", {}, r"unknown reasoning-gym dataset 'leg_countin' \(did you mean 'leg_counting'"),
    ("leg_counting", {"min_animal": 3}, r"reasoning_gym:leg_counting: unknown task_kw key 'min_animal' \(did you mean "
                                        r"'min_animals'.*\); reasoning_gym:leg_counting's knobs: size, seed, "
                                        r"min_animals, max_animals"),
    ("leg_counting", {"min_animals": "3"}, r"wrong type for min_animals='3' \(str; need int\)"),
    ("leg_counting", {"size": 100_001}, r"need 2 <= size <= 100000 .*got size=100001"),
    ("leg_counting", {"min_animals": -3}, r"reasoning_gym:leg_counting: its config refuses \{'min_animals': -3\}: "
                                          r"min_animals must be positive"),
])
def test_reasoning_gym_knobs_are_checked_against_the_datasets_config(dataset, kw, message):
    """Names and types are checked against the dataset's config class first; its own asserts become ValueErrors."""
    pytest.importorskip("reasoning_gym", reason="reasoning-gym not installed: pip install -e '.[tasks]'")
    with pytest.raises(ValueError, match=message):
        get_task(f"reasoning_gym:{dataset}", **kw)
