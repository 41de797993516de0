"""The countdown task: any valid expression is accepted, junk is rejected without raising."""
from __future__ import annotations

import random

import pytest

from workbench.tasks import Example, get_task
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


def test_min_numbers_mixes_puzzle_sizes_and_leaves_the_default_stream_alone():
    mixed = get_task("countdown", min_numbers=2, n_numbers=5)
    sizes = [len(e.prompt.split(">")[0].split()) for e in mixed.sample(400, random.Random(0))]
    assert set(sizes) == {2, 3, 4, 5} and all(60 <= sizes.count(n) <= 140 for n in (2, 3, 4, 5))
    assert all(mixed.score(e.target, e) == 1.0 for e in mixed.sample(50, random.Random(1)))
    plain, fixed = get_task("countdown"), get_task("countdown", min_numbers=3, n_numbers=3)
    assert [e.prompt for e in plain.sample(20, random.Random(2))] == [e.prompt for e in fixed.sample(20, random.Random(2))]
    assert plain.eval_file == "countdown.jsonl" and mixed.eval_file is None  # mixed: its own held-out draw
    with pytest.raises(ValueError, match=r"countdown: need 2 <= min_numbers <= n_numbers=3, got min_numbers=4"):
        get_task("countdown", min_numbers=4)


@pytest.mark.parametrize("kw, message", [
    ({"max_number": 10**6}, r"countdown: only 0 of 2000 random expressions over n_numbers=3 numbers in "
                            r"1..max_number=1000000 land on a target in 0..99 .*; lower max_number"),
    ({"n_numbers": 13}, r"countdown: need 2 <= n_numbers <= 12, got n_numbers=13"),
    ({"n_numbers": 12, "max_number": 10**15}, r"countdown: n_numbers=12, max_number=10+ make expressions of up to 223 "
                                              r"characters, but the verifier reads at most 200"),
    ({"max_number": 0}, r"countdown: need max_number >= 1, got max_number=0"),
])
def test_numbers_that_rarely_make_a_target_are_refused_before_generation(kw, message):
    """max_number=10**6: three such numbers land in 0..99 almost never, and the draw looped until they did."""
    with pytest.raises(ValueError, match=message):
        get_task("countdown", **kw)


def test_knobs_with_too_few_prompts_for_a_held_out_set_are_refused_naming_them():
    task = get_task("countdown", n_numbers=2, max_number=1)  # "1 1>0:", "1 1>1:", "1 1>2:" only
    with pytest.raises(ValueError, match=r"countdown: CountdownTask\(n_numbers=2, max_number=1\) makes only 3 distinct "
                                         r"prompts .*too few to hold one in 5 out"):
        task.eval_set()
    assert get_task("countdown", max_number=1000).sample(3, random.Random(0))  # rare targets, yet 2% land
