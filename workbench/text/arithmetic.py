"""Integer arithmetic over + - * as the calculator and countdown tasks verify it.

    apply(a, op, b)                   a op b
    solve_trace("2*3+4*5")            the one-operation calls that evaluate an expression with the usual precedence
    call_result("[37*48]")            1776: what the calculator tool answers to an action (None: not a well-formed call)
    evaluate("3*5+7", [3, 5, 7])      22: a countdown expression's value if it uses exactly the given numbers, else None

The environments that verify (`envs.calculator`, `tasks.countdown`) and the rewards that grade intermediate steps
(`rewards.milestones`, `rewards.fapo`, `rewards.retroagent`, `rewards.ssl`) read the same definitions.
"""
from __future__ import annotations

import ast
import re
from collections import Counter

CALL = re.compile(r"\[(-?\d+)([+\-*])(-?\d+)\]")   # the only tool call the calculator accepts
TOKEN = re.compile(r"\d+|[+\-*]")
MAX_OPERAND_CHARS = 12  # a longer number is junk; also bounds the tool's work
MAX_EXPRESSION_CHARS = 200  # a longer countdown completion is junk; also keeps ast.parse cheap
EXPRESSION_CHARS = frozenset("0123456789+-*() ")
OPERATORS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*"}


def apply(a: int, op: str, b: int) -> int:
    return a + b if op == "+" else a - b if op == "-" else a * b


def first_operation(tokens: list) -> int:
    """Index of the operator evaluated first: the leftmost `*`, else the leftmost `+`/`-`."""
    ops = [i for i in range(1, len(tokens), 2)]
    stars = [i for i in ops if tokens[i] == "*"]
    return stars[0] if stars else ops[0]


def solve_trace(expression: str) -> list[tuple[int, str, int, int, tuple[int, ...]]]:
    """The (a, op, b, a op b, sources) calls that evaluate `expression` with the usual precedence, in order;
    sources: the indices of the earlier calls whose results it takes as operands ("2*3+4*5" -> the third call
    adds the results of calls 0 and 1). The process rewards' milestones follow this data flow."""
    tokens = [t if t in "+-*" else int(t) for t in TOKEN.findall(expression)]
    source = [None] * len(tokens)  # which call produced each operand (None: a number of the expression)
    steps = []
    while len(tokens) > 1:
        i = first_operation(tokens)
        a, op, b = tokens[i - 1], tokens[i], tokens[i + 1]
        value, used = apply(a, op, b), tuple(s for s in (source[i - 1], source[i + 1]) if s is not None)
        steps.append((a, op, b, value, used))
        tokens[i - 1:i + 2], source[i - 1:i + 2] = [value], [len(steps) - 1]
    return steps


def solve_steps(expression: str) -> list[tuple[int, str, int, int]]:
    """The (a, op, b, a op b) calls that evaluate `expression` with the usual precedence, in order."""
    return [step[:4] for step in solve_trace(expression)]


def call_result(action: str) -> int | None:
    """What the tool answers to one action: the value of a well-formed call "[a op b]" (the whole stripped action,
    operands of at most MAX_OPERAND_CHARS characters), None for anything else (a malformed call or an answer)."""
    call = CALL.fullmatch(action.strip())
    if call is None or max(len(call.group(1)), len(call.group(3))) > MAX_OPERAND_CHARS:
        return None
    return apply(int(call.group(1)), call.group(2), int(call.group(3)))


def evaluate(completion: str, numbers: list[int]) -> int | None:
    """Value of `completion` if it is a legal countdown expression over exactly `numbers`, else None.

    The text is parsed with `ast` (never `eval`): only integer literals, binary + - * and parentheses are allowed,
    and the literals must be exactly the given numbers (as a multiset)."""
    text = completion.strip()
    if not text or len(text) > MAX_EXPRESSION_CHARS or not set(text) <= EXPRESSION_CHARS:
        return None
    try:
        tree = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    literals: list[int] = []
    if not _collect_literals(tree, literals) or Counter(literals) != Counter(numbers):
        return None
    # Safe to evaluate now: the literals are the given small numbers, each used once.
    return _value(tree)


def _collect_literals(node: ast.AST, out: list[int]) -> bool:
    """Append the int literals of `node` to `out`; False if any node is not allowed."""
    if isinstance(node, ast.Constant):
        if type(node.value) is not int:  # bool is an int subclass; reject it too
            return False
        out.append(node.value)
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
        return _collect_literals(node.left, out) and _collect_literals(node.right, out)
    return False  # unary minus, division, names, calls, ...


def _value(node: ast.AST) -> int:
    if isinstance(node, ast.Constant):
        return node.value
    return apply(_value(node.left), OPERATORS[type(node.op)], _value(node.right))
