"""Teachers at toy scale: a teacher maps an example to one whole solution (its action texts), or to nothing.

    expert       the task's own solution, `solution_actions(task, example)`: every task with solutions
    padded       the expert's one-action solution after a space (" 46" for "46"), where the verifier accepts it
    search       countdown: the first expression over the numbers in ascending order that hits the target
    search-desc  countdown: the same search over the numbers in descending order

    pool = teacher_solutions(task, example, ("expert", "padded", "search", "search-desc"))
         -> [(name, actions), ...]   the teachers with a solution for `example`, in the order named

AMPO's pool is four teacher LLMs whose long chains of thought differ in content and style. Here the teachers are
exact solvers, not language models: every solution they give is one the task's verifier accepts (the searches and
`padded` check theirs with `task.score`; `expert` is the task's own), so a teacher is never wrong, and what differs
between them is which correct solution they write, or only its form:

  - countdown admits many correct expressions. `expert` is the task's own random expression tree (the SFT target);
    the two searches walk expression trees left to right over the sorted numbers and stop at the first hit, so they
    write small-first or large-first expressions, in most examples different from the expert's and from each other.
  - addition has one answer. `search` and `search-desc` offer nothing, and `expert` ("46") and `padded` (" 46") differ
    only in form: the same answer, a different first token.
  - a multi-turn task (several actions) gets `expert` alone.

A teacher with nothing for an example is left out of that example's pool, as the reference's per-prompt
`num_teacher_models` counts only the targets the example has; a solution whose text repeats an earlier teacher's is
left out too (two copies of one text would be scored alike and could fill both of a group's teacher rows).
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

from workbench.params import did_you_mean
from workbench.tasks.base import Example, Task
from workbench.tasks.countdown import OPS, PRECEDENCE, _wrap
from workbench.tasks.guidance import solution_actions
from workbench.text.answers import countdown_answer
from workbench.text.arithmetic import apply

SEARCH_LIMIT = 200_000  # expressions a search tries at most (3 numbers have 108, 4 numbers 4320 per ordering)


def expert(task: Task, example: Example) -> list[str] | None:
    """The task's own solution (`solution_actions`; a task without one is refused there, naming the fix)."""
    return solution_actions(task, example)


def padded(task: Task, example: Example) -> list[str] | None:
    """The expert's one-action solution after a space, if the verifier scores it 1 (addition and countdown strip
    whitespace); None for a multi-action solution or a verifier that rejects it."""
    actions = solution_actions(task, example)
    if len(actions) != 1:
        return None
    text = " " + actions[0]
    return [text] if accepts(task, example, text) else None


def accepts(task: Task, example: Example, text: str) -> bool:
    """Does the task's one-turn verifier score `text` 1 (False where the task has no `score` of its own)?"""
    try:
        return task.score(text, example) == 1.0
    except NotImplementedError:
        return False


def expressions(numbers: tuple[int, ...]) -> Iterator[tuple[str, int, int]]:
    """Every binary expression over `numbers` in this order, as (minimal-parenthesis text, value, precedence of the
    top operator; 3 for a bare number): splits left to right, operators in the order + - *. The texts are
    parenthesized as the task writes its own (`countdown._wrap`)."""
    if len(numbers) == 1:
        yield str(numbers[0]), numbers[0], 3
        return
    for split in range(1, len(numbers)):
        for left in expressions(numbers[:split]):
            for right in expressions(numbers[split:]):
                for op in OPS:
                    prec = PRECEDENCE[op]
                    # a-(b+c) and a-(b-c) keep their parentheses although the precedences are equal
                    text = (_wrap(left[0], left[2] < prec) + op
                            + _wrap(right[0], right[2] < prec or (op == "-" and right[2] == prec)))
                    yield text, apply(left[1], op, right[1]), prec


def orderings(numbers: list[int], descending: bool) -> Iterator[tuple[int, ...]]:
    """The distinct orderings of `numbers` in lexicographic order from the sorted one (ascending, or descending):
    the next-permutation step, which yields a repeated number's orderings once and needs no memory of them."""
    sign = -1 if descending else 1
    keys = sorted(sign * n for n in numbers)
    while True:
        yield tuple(sign * k for k in keys)
        i = len(keys) - 2
        while i >= 0 and keys[i] >= keys[i + 1]:
            i -= 1
        if i < 0:
            return
        j = len(keys) - 1
        while keys[j] <= keys[i]:
            j -= 1
        keys[i], keys[j] = keys[j], keys[i]
        keys[i + 1:] = reversed(keys[i + 1:])


def countdown_search(task: Task, example: Example, descending: bool) -> list[str] | None:
    """The first expression hitting the target over the orderings of the numbers (lexicographic from the sorted
    numbers, ascending or descending), within SEARCH_LIMIT expressions; None off countdown or past the limit."""
    if task.name != "countdown":
        return None
    target, numbers = countdown_answer(example.answer)
    candidates = itertools.chain.from_iterable(expressions(order) for order in orderings(numbers, descending))
    for text, value, _ in itertools.islice(candidates, SEARCH_LIMIT):
        if value == target and accepts(task, example, text):
            return [text]
    return None


TEACHERS: dict[str, Callable[[Task, Example], list[str] | None]] = {
    "expert": expert,
    "padded": padded,
    "search": lambda task, example: countdown_search(task, example, descending=False),
    "search-desc": lambda task, example: countdown_search(task, example, descending=True),
}
DEFAULT_POOL = ("expert", "padded", "search", "search-desc")  # four teachers, as the paper's (max_available_targets=4)


def check_teachers(names) -> tuple[str, ...]:
    """A non-empty list of distinct known teacher names, refused naming the closest known one otherwise."""
    if isinstance(names, str) or not names:
        raise ValueError(f"teachers={names!r} must be a non-empty list of teacher names, from {list(TEACHERS)}")
    for name in names:
        if name not in TEACHERS:
            raise ValueError(f"teachers: unknown teacher {name!r}{did_you_mean(str(name), TEACHERS)}; "
                             f"teachers are {list(TEACHERS)}")
    if len(set(names)) != len(names):
        raise ValueError(f"teachers={list(names)!r} names a teacher twice; name each once")
    return tuple(names)


def teacher_solutions(task: Task, example: Example, names) -> list[tuple[str, list[str]]]:
    """(name, actions) of each teacher in `names` that has a solution for `example`, in that order; a solution whose
    text an earlier teacher already gave is left out."""
    pool, seen = [], set()
    for name in check_teachers(names):
        actions = TEACHERS[name](task, example)
        if actions and "".join(actions) not in seen:
            seen.add("".join(actions))
            pool.append((name, list(actions)))
    return pool
