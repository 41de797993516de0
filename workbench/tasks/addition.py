"""Integer addition: prompt "12+34=", target "46"."""
from __future__ import annotations

import random

from workbench import registry
from workbench.envs.base import check_knob_rules, check_knob_types, knob_kinds
from workbench.tasks.base import Example, Task

MAX_DIGITS = 4000  # Python converts ints of at most 4300 digits to text (sys.get_int_max_str_digits)


@registry.env(
    "addition", title="Integer addition: one-turn arithmetic with an exact verifier", family="canonical",
    summary="Answer 'a+b=' with the sum of two integers of up to `digits` digits; reward 1 iff the answer is exact.")
class AdditionTask(Task):
    """Add two integers drawn uniformly from [0, 10**digits).

    Format: prompt ``f"{a}+{b}="``, answer and target ``str(a + b)``. The verifier strips
    surrounding whitespace and requires an exact string match (so "046" is wrong).
    """

    name = "addition"
    DEFAULT_DIGITS = 2

    def __init__(self, *, digits: int = DEFAULT_DIGITS):
        check_knob_types("addition", locals(), knob_kinds(AdditionTask))
        check_knob_rules("addition", [(not 1 <= digits <= MAX_DIGITS,
                                       f"1 <= digits <= {MAX_DIGITS}, got digits={digits}")])
        self.digits = digits
        # The shipped file was drawn with the default parameters; any other setting gets its own
        # held-out set generated in memory so `sample` still has something to avoid.
        self.eval_file = "addition.jsonl" if digits == self.DEFAULT_DIGITS else None

    def make_example(self, rng: random.Random) -> Example:
        high = 10**self.digits
        a, b = rng.randrange(high), rng.randrange(high)
        total = str(a + b)
        return Example(prompt=f"{a}+{b}=", answer=total, target=total)

    def score(self, completion: str, example: Example) -> float:
        return 1.0 if completion.strip() == example.answer else 0.0

    def __repr__(self) -> str:
        return f"AdditionTask(digits={self.digits})"
