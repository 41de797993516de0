"""Countdown arithmetic: combine the given numbers with + - * and parentheses to hit a target.

Format, e.g. numbers 3 5 7 and target 22:
    prompt  "3 5 7>22:"   numbers ascending, space-separated, then ">" target ":"
    target  "3*5+7"       one solution, no spaces, only the parentheses it needs
    answer  "22|3 5 7"    target value "|" the numbers, so the verifier needs only `answer`
                          (`workbench.text.answers.countdown_answer`)
"""
from __future__ import annotations

import functools
import random

from workbench import registry
from workbench.envs.base import check_knob_rules, check_knob_types, knob_kinds
from workbench.tasks.base import PROBE_SEED, Example, Task, redraw
from workbench.text.answers import countdown_answer
from workbench.text.arithmetic import MAX_EXPRESSION_CHARS, apply, evaluate

OPS = ("+", "-", "*")
PRECEDENCE = {"+": 1, "-": 1, "*": 2}
MAX_TARGET = 99
MAX_NUMBERS = 12  # a draw's expression tree and its text grow with the numbers; the game itself has six
DRAW_TRIES = 10_000  # expressions drawn per example at most
PROBE_DRAWS, MIN_HITS = 2000, 20  # an expression lands in 0..MAX_TARGET 1% of the time or more (checked when built)


@registry.env(
    "countdown", title="Countdown: combine the given numbers with + - * to hit a target", family="canonical",
    summary="Write an expression using each given number exactly once that equals the target; reward 1 iff it is "
            "legal and exact (parsed, never evaluated as code).")
class CountdownTask(Task):
    """Use each of `n_numbers` numbers in [1, max_number] exactly once to make the target; with `min_numbers`, each
    puzzle has between `min_numbers` and `n_numbers` of them, drawn uniformly (a pool of mixed difficulty: the tiny
    model solves most 2-number puzzles and few 5-number ones, the setting of the F5 data-selection comparison).

    The verifier (`workbench.text.arithmetic.evaluate`) parses the completion with `ast` (never `eval`): only
    integer literals, binary + - *, and parentheses are allowed; the literals must be exactly the given numbers
    (as a multiset) and the value must equal the target. Anything else scores 0.0. Refused when built:
    n_numbers > 12, expressions longer than the verifier reads, numbers that land on a target (0..99) in under 1%
    of random expressions.
    """

    name = "countdown"
    DEFAULTS = {"n_numbers": 3, "max_number": 9, "min_numbers": None}

    def __init__(self, *, n_numbers: int = 3, max_number: int = 9, min_numbers: int | None = None):
        check_knob_types("countdown", locals(), knob_kinds(CountdownTask))
        check_knob_rules("countdown", [
            (not 2 <= n_numbers <= MAX_NUMBERS, f"2 <= n_numbers <= {MAX_NUMBERS}, got n_numbers={n_numbers}"),
            (max_number < 1, f"max_number >= 1, got max_number={max_number}"),
            (min_numbers is not None and not 2 <= min_numbers <= n_numbers,
             f"2 <= min_numbers <= n_numbers={n_numbers}, got min_numbers={min_numbers}"),
        ])
        self.sizes = list(range(n_numbers if min_numbers is None else min_numbers, n_numbers + 1))
        for n in self.sizes:
            check_expression_length(n, max_number)
            check_targets_reachable(n, max_number)
        self.n_numbers, self.max_number, self.min_numbers = n_numbers, max_number, min_numbers
        params = {"n_numbers": n_numbers, "max_number": max_number, "min_numbers": min_numbers}
        # The shipped file holds default-parameter prompts only; see AdditionTask.
        self.eval_file = "countdown.jsonl" if params == self.DEFAULTS else None

    def make_example(self, rng: random.Random) -> Example:
        n = self.n_numbers if len(self.sizes) == 1 else rng.choice(self.sizes)  # one draw: the default's stream as it was
        numbers, text, value = redraw(lambda: draw_in_range(rng, n, self.max_number), DRAW_TRIES,
                                      f"{self!r}: no expression within 0..{MAX_TARGET} in {DRAW_TRIES} draws")
        shown = " ".join(map(str, sorted(numbers)))
        return Example(prompt=f"{shown}>{value}:", answer=f"{value}|{shown}", target=text)

    def score(self, completion: str, example: Example) -> float:
        value, numbers = countdown_answer(example.answer)
        result = evaluate(completion, numbers)
        return 1.0 if result == value else 0.0

    def __repr__(self) -> str:
        mixed = "" if self.min_numbers is None else f", min_numbers={self.min_numbers}"
        return f"CountdownTask(n_numbers={self.n_numbers}, max_number={self.max_number}{mixed})"


def draw_in_range(rng: random.Random, n_numbers: int, max_number: int):
    """(numbers, expression text, value) of one random expression if its value is a target (0..MAX_TARGET), else
    None."""
    numbers = [rng.randint(1, max_number) for _ in range(n_numbers)]
    text, value = random_expression(numbers, rng)
    return (numbers, text, value) if 0 <= value <= MAX_TARGET else None


def check_expression_length(n_numbers: int, max_number: int) -> None:
    """Refuse numbers whose expression can outgrow what the verifier reads (MAX_EXPRESSION_CHARS): the expert's own
    target would score 0. The longest: every number of max_number's digits, n - 1 operators, n - 2 pairs of
    parentheses."""
    longest = n_numbers * len(str(max_number)) + (n_numbers - 1) + 2 * (n_numbers - 2)
    if longest > MAX_EXPRESSION_CHARS:
        raise ValueError(f"countdown: n_numbers={n_numbers}, max_number={max_number} make expressions of up to "
                         f"{longest} characters, but the verifier reads at most {MAX_EXPRESSION_CHARS} "
                         "(workbench.text.arithmetic.MAX_EXPRESSION_CHARS); lower max_number or n_numbers")


@functools.lru_cache(maxsize=256)
def probe_targets(n_numbers: int, max_number: int) -> tuple[int, int]:
    """(expressions drawn, how many landed in 0..MAX_TARGET) of up to PROBE_DRAWS seeded draws, stopping at
    MIN_HITS."""
    rng, drawn, hits = random.Random(PROBE_SEED), 0, 0
    while drawn < PROBE_DRAWS and hits < MIN_HITS:
        drawn, hits = drawn + 1, hits + (draw_in_range(rng, n_numbers, max_number) is not None)
    return drawn, hits


def check_targets_reachable(n_numbers: int, max_number: int) -> None:
    """Refuse numbers that rarely combine into a target (0..MAX_TARGET): each example is redrawn until one does."""
    drawn, hits = probe_targets(n_numbers, max_number)
    if hits < MIN_HITS:
        raise ValueError(f"countdown: only {hits} of {drawn} random expressions over n_numbers={n_numbers} numbers in "
                         f"1..max_number={max_number} land on a target in 0..{MAX_TARGET} (at least {MIN_HITS} are "
                         "needed, or drawing examples takes too long); lower max_number")


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
