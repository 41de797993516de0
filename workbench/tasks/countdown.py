"""Countdown arithmetic: combine the given numbers with + - * and parentheses to hit a target.

Format, e.g. numbers 3 5 7 and target 22:
    prompt  "3 5 7>22:"   numbers ascending, space-separated, then ">" target ":"
    target  "3*5+7"       one solution, no spaces, only the parentheses it needs
    answer  "22|3 5 7"    target value "|" the numbers, so the verifier needs only `answer`
                          (`workbench.text.answers.countdown_answer`)
"""
from __future__ import annotations

import random

from workbench import registry
from workbench.tasks.base import Example, Task
from workbench.text.answers import countdown_answer
from workbench.text.arithmetic import apply, evaluate

OPS = ("+", "-", "*")
PRECEDENCE = {"+": 1, "-": 1, "*": 2}
MAX_TARGET = 99


@registry.env(
    "countdown", title="Countdown: combine the given numbers with + - * to hit a target", family="canonical",
    summary="Write an expression using each given number exactly once that equals the target; reward 1 iff it is "
            "legal and exact (parsed, never evaluated as code).")
class CountdownTask(Task):
    """Use each of `n_numbers` numbers in [1, max_number] exactly once to make the target.

    The verifier (`workbench.text.arithmetic.evaluate`) parses the completion with `ast` (never `eval`): only
    integer literals, binary + - *, and parentheses are allowed; the literals must be exactly the given numbers
    (as a multiset) and the value must equal the target. Anything else scores 0.0.
    """

    name = "countdown"
    DEFAULTS = {"n_numbers": 3, "max_number": 9}

    def __init__(self, *, n_numbers: int = 3, max_number: int = 9):
        if n_numbers < 2 or max_number < 1:
            raise ValueError(f"need n_numbers >= 2 and max_number >= 1, got {n_numbers}, {max_number}")
        self.n_numbers = n_numbers
        self.max_number = max_number
        params = {"n_numbers": n_numbers, "max_number": max_number}
        # The shipped file holds default-parameter prompts only; see AdditionTask.
        self.eval_file = "countdown.jsonl" if params == self.DEFAULTS else None

    def make_example(self, rng: random.Random) -> Example:
        while True:
            numbers = [rng.randint(1, self.max_number) for _ in range(self.n_numbers)]
            text, value = random_expression(numbers, rng)
            if 0 <= value <= MAX_TARGET:
                break
        shown = " ".join(map(str, sorted(numbers)))
        return Example(prompt=f"{shown}>{value}:", answer=f"{value}|{shown}", target=text)

    def score(self, completion: str, example: Example) -> float:
        value, numbers = countdown_answer(example.answer)
        result = evaluate(completion, numbers)
        return 1.0 if result == value else 0.0

    def __repr__(self) -> str:
        return f"CountdownTask(n_numbers={self.n_numbers}, max_number={self.max_number})"


def random_expression(numbers: list[int], rng: random.Random) -> tuple[str, int]:
    """A random binary expression tree over a shuffle of `numbers`: (minimal-paren text, value)."""
    order = list(numbers)
    rng.shuffle(order)
    text, value, _ = _build(order, rng)
    return text, value


def _build(numbers: list[int], rng: random.Random) -> tuple[str, int, int]:
    """(text, value, precedence of the top operator; 3 for a bare number)."""
    if len(numbers) == 1:
        return str(numbers[0]), numbers[0], 3
    split = rng.randint(1, len(numbers) - 1)
    left, right = _build(numbers[:split], rng), _build(numbers[split:], rng)
    op = rng.choice(OPS)
    prec = PRECEDENCE[op]
    left_text = _wrap(left[0], left[2] < prec)
    # a-(b+c) and a-(b-c) need their parentheses even though the precedences are equal.
    right_text = _wrap(right[0], right[2] < prec or (op == "-" and right[2] == prec))
    return f"{left_text}{op}{right_text}", apply(left[1], op, right[1]), prec


def _wrap(text: str, needed: bool) -> str:
    return f"({text})" if needed else text
