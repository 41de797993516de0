"""Arithmetic with a calculator tool (tool-integrated reasoning), sized for a character-level model.

Format, e.g. 37*48+19:
    prompt        "37*48+19="
    action        "[37*48]"        a tool call: exactly two integers and one operator (stop string "]")
    observation   "1776\n"         the tool's result ("ERR\n" and info["tool_error"] for a malformed call)
    action        "[1776+19]"      ... one call per operator, in precedence order (the expert's way)
    observation   "1795\n"
    action        "A:1795" + EOS   the final answer: any action that is not a tool call ends the episode
The verifier is exact: reward 1 iff the final answer after the last "A:" equals the expression's value.
The tool takes one operation per call, so the model has to split the expression (calling it on the whole
prompt is an error); the state an action is taken from is the list of results seen so far. The call syntax and
the arithmetic (`call_result`, `solve_steps`) live in `workbench.text.arithmetic`, where the rewards read them too.
"""
from __future__ import annotations

import random

from workbench import registry
from workbench.envs.base import Env, check_knob_rules, check_knob_types, knob_kinds, tool, user
from workbench.tasks.base import Example, Task
from workbench.text.arithmetic import MAX_OPERAND_CHARS, call_result, solve_steps

MAX_OPERANDS = 50  # an expert episode takes ~10 characters per operand, and a draw's work grows with its square


def final_answer(text: str) -> str | None:
    """What follows the last "A:" (stripped), or None."""
    return text.rsplit("A:", 1)[1].strip() if "A:" in text else None


def longest_operand(n_operands: int, digits: int, ops: str) -> int:
    """The most characters of an operand the expert ever passes the tool, over every expression the knobs can draw
    (numbers 1 .. 10**digits - 1). Operands are the numbers, partial products (at most n_operands - 1 factors: the
    last operation's result is the answer, never an operand) and partial sums of the terms; every one is
    multilinear in the numbers, so its extremes are at numbers 1 and 10**digits - 1:
    the largest is a product of n_operands - 1 top numbers (with "*"), else a sum of them (with "+"), else a
    number; the most negative, with "-", is 1 minus a product (or sum) of n_operands - 2 top numbers."""
    top = 10 ** digits - 1
    largest = top ** (n_operands - 1) if "*" in ops else (n_operands - 1) * top if "+" in ops else top
    chars = len(str(largest))
    if "-" in ops and n_operands >= 3:
        subtracted = top ** (n_operands - 2) if "*" in ops else (n_operands - 2) * top
        chars = max(chars, len(str(1 - subtracted)))
    return chars


def check_tool_operands(n_operands: int, digits: int, ops: str) -> None:
    """Refuse knobs whose expressions make the expert pass the tool an operand it refuses (more than
    MAX_OPERAND_CHARS characters): its call would return ERR and the SFT data would teach ignoring tool errors."""
    chars = longest_operand(n_operands, digits, ops)
    if chars <= MAX_OPERAND_CHARS:
        return
    fits = lambda n, d: longest_operand(n, d, ops) <= MAX_OPERAND_CHARS  # noqa: E731
    ways = [f"digits <= {max(d for d in range(1, digits) if fits(n_operands, d))} with n_operands={n_operands}"
            if fits(n_operands, 1) else None,
            f"n_operands <= {max(n for n in range(2, n_operands) if fits(n, digits))} with digits={digits}"
            if fits(2, digits) else None]
    plain = ops.replace("*", "")
    ways = [w for w in ways if w] + ([f"ops={plain!r}"] if plain and longest_operand(n_operands, digits, plain)
                                     <= MAX_OPERAND_CHARS else [])
    raise ValueError(f"calculator: digits={digits}, n_operands={n_operands}, ops={ops!r} make the expert pass the "
                     f"tool operands of up to {chars} characters, but it refuses more than {MAX_OPERAND_CHARS} "
                     f"(workbench.text.arithmetic.MAX_OPERAND_CHARS): those calls would return ERR; use "
                     + " or ".join(ways))


@registry.env(
    "calculator", title="Calculator tool: arithmetic by one-operation tool calls", family="canonical",
    summary="Evaluate a + - * expression by calling a calculator '[a op b]' once per operation, then answer "
            "'A:<value>'; reward 1 iff the final answer is exact.")
class CalculatorTask(Task):
    """`n_operands` integers of up to `digits` digits joined by `ops` (evaluated with precedence).

    Knobs (`task_kw`): n_operands (default 5), digits (2), ops ("+-*"), slack (extra turns beyond the
    expert's n_operands - 1 calls + answer, default 2: room to recover from an error). Held-out set: 200
    prompts in data/eval/calculator.jsonl (drawn by `make_eval`; other parameters draw theirs in memory).
    Refused when built: knobs whose expressions give the expert an operand the tool refuses (`longest_operand`
    above 12 characters, e.g. digits=4 with the defaults), n_operands > 50.
    """

    name = "calculator"
    DEFAULTS = {"n_operands": 5, "digits": 2, "ops": "+-*"}  # what the examples depend on

    def __init__(self, *, n_operands: int = 5, digits: int = 2, ops: str = "+-*", slack: int = 2):
        check_knob_types("calculator", locals(), knob_kinds(CalculatorTask))
        check_knob_rules("calculator", [
            (not 2 <= n_operands <= MAX_OPERANDS, f"2 <= n_operands <= {MAX_OPERANDS}, got n_operands={n_operands}"),
            (not 1 <= digits <= MAX_OPERAND_CHARS,
             f"1 <= digits <= {MAX_OPERAND_CHARS} (the tool's longest operand), got digits={digits}"),
            (not ops or bool(set(ops) - set("+-*")), f"ops from '+-*' (at least one), got ops={ops!r}"),
            (slack < 0, f"slack >= 0, got slack={slack}"),
        ])
        check_tool_operands(n_operands, digits, ops)
        self.n_operands, self.digits, self.ops, self.slack = n_operands, digits, ops, slack
        self.max_turns = n_operands + slack  # n_operands - 1 calls + 1 answer + slack
        params = {"n_operands": n_operands, "digits": digits, "ops": ops}
        self.eval_file = "calculator.jsonl" if params == self.DEFAULTS else None  # see AdditionTask

    def make_example(self, rng: random.Random) -> Example:
        numbers = [rng.randrange(1, 10 ** self.digits) for _ in range(self.n_operands)]
        ops = [rng.choice(self.ops) for _ in range(self.n_operands - 1)]
        expression = str(numbers[0]) + "".join(f"{op}{n}" for op, n in zip(ops, numbers[1:]))
        value = solve_steps(expression)[-1][3]
        return Example(prompt=f"{expression}=", answer=str(value), target=f"A:{value}")

    def score(self, completion: str, example: Example) -> float:
        return 1.0 if final_answer(completion) == example.answer else 0.0

    def expert_actions(self, example: Example) -> list[str]:
        calls = [f"[{a}{op}{b}]" for a, op, b, _ in solve_steps(example.prompt)]
        return calls + [example.target]

    def make_env(self) -> "CalculatorEnv":
        return CalculatorEnv(self)

    def __repr__(self) -> str:
        return (f"CalculatorTask(n_operands={self.n_operands}, digits={self.digits}, ops={self.ops!r}, "
                f"slack={self.slack})")


class CalculatorEnv(Env):
    """One episode of a CalculatorTask example (see the module docstring for the transcript)."""

    stop = ("]",)

    def __init__(self, task: CalculatorTask):
        self.task = task
        self.max_turns = task.max_turns
        self.example, self.results = None, ()

    def reset(self, example: Example, seed: int | None = None):
        self.example, self.results = example, ()
        return [user(example.prompt)], {"state": (example.prompt, self.results)}

    def step(self, action: str):
        if self.example is None:
            raise RuntimeError("step before reset")
        if not action.endswith("]"):  # not a tool call: the final answer
            return [], self.task.score(action, self.example), True, {"state": None}
        result = call_result(action)
        if result is None:
            error = "malformed call: expected [a op b] with two integers"
            return [tool("ERR\n")], 0.0, False, {"state": (self.example.prompt, self.results), "tool_error": error}
        self.results += (result,)
        return [tool(f"{result}\n")], 0.0, False, {"state": (self.example.prompt, self.results), "tool_error": None}
