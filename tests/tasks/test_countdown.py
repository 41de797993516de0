"""The countdown task: any valid expression is accepted, junk is rejected without raising."""
from __future__ import annotations

import random

import pytest

from workbench.tasks import Example
from workbench.tasks.countdown import CountdownTask

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
