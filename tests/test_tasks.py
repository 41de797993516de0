"""Built-in tasks: formats, verifiers, held-out sets, registry, and the reasoning-gym adapter."""
from __future__ import annotations

import random
import sys

import pytest

from workbench.paths import DATA_DIR
from workbench.tasks import TASKS, Example, get_task, task_names
from workbench.tasks.countdown import CountdownTask
from workbench.tasks.make_eval import EVAL_SIZE, main as make_eval_main

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


@pytest.mark.parametrize("name", sorted(TASKS))
def test_default_examples_are_short_printable_ascii(name):
    task = get_task(name)
    for e in task.eval_set() + task.sample(500, random.Random(2)):
        assert printable(e.prompt) and printable(e.target) and printable(e.answer), e
        assert len(e.prompt) <= 20 and len(e.target) <= 12, e


def test_shipped_eval_files(tmp_path):
    make_eval_main(["--out", str(tmp_path)])
    for name in sorted(TASKS):
        task = get_task(name)
        shipped = DATA_DIR / "eval" / task.eval_file
        assert (tmp_path / task.eval_file).read_bytes() == shipped.read_bytes(), name
        assert len(task.eval_set()) == EVAL_SIZE
        assert len(task.eval_set(10)) == 10


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


COUNTDOWN = Example(prompt="3 5 7>22:", answer="22|3 5 7", target="3*5+7")


@pytest.mark.parametrize("completion", ["3*5+7", "7+5*3", "(5*3)+7", " 3 * 5 + 7 \n", "((3*5))+7"])
def test_countdown_accepts_any_valid_solution(completion):
    assert CountdownTask().score(completion, COUNTDOWN) == 1.0


@pytest.mark.parametrize(
    "completion",
    [
        "3+5+7",                      # wrong value
        "(3+5)*7",                    # wrong value
        "3*5+7+7",                    # 7 reused
        "3*7+1",                      # 5 missing, 1 not given
        "15+7",                       # numbers merged
        "3*5",                        # number missing
        "3*5+7=22",                   # not an expression
        "22",                         # just the target
        "-(3-5*7)-10",                # unary minus, extra number
        "3*5+7.0",                    # float literal
        "3*5+0x7",                    # hex literal
        "3*5+7_0",                    # underscore literal
        "(3*5+7",                     # unbalanced
        "3*5)+7",                     # unbalanced
        "3*5+7)",                     # unbalanced
        "",
        "   ",
        "__import__('os').system('echo pwned')",
        "(lambda: 22)()",
        "True*22",
        "3**5+7",
        "(" * 150 + "3*5+7" + ")" * 150,  # deeper than ast allows
        "1+" * 100_000 + "1",             # huge junk
        "\x00\xff\u2603",
    ],
)
def test_countdown_rejects_junk_without_raising(completion):
    assert CountdownTask().score(completion, COUNTDOWN) == 0.0


def test_countdown_rejects_division_and_unary_minus_even_when_the_value_matches():
    task = CountdownTask()
    assert task.score("4/2+9", Example("2 4 9>11:", "11|2 4 9", "9+4-2")) == 0.0
    assert task.score("9//2+7", Example("2 7 9>11:", "11|2 7 9", "9+2")) == 0.0
    assert task.score("-3+5*7", Example("3 5 7>32:", "32|3 5 7", "5*7-3")) == 0.0


def test_countdown_example_format():
    for e in CountdownTask().sample(200, random.Random(3)):
        numbers, rest = e.prompt[:-1].split(">")
        assert e.prompt.endswith(":") and e.answer == f"{rest}|{numbers}"
        assert numbers.split() == sorted(numbers.split(), key=int) and len(numbers.split()) == 3
        assert 0 <= int(rest) <= 99 and " " not in e.target


def test_registry():
    assert task_names() == ["addition", "calculator", "countdown", "gridworld", "search"]
    assert get_task("addition", digits=3).digits == 3
    with pytest.raises(ValueError, match=r"unknown task 'nope'.*addition, calculator, countdown"):
        get_task("nope")


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
