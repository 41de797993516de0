"""Integer arithmetic as the calculator and countdown verify it: precedence, the tool's answers, legal expressions."""
import pytest

from workbench.text.arithmetic import MAX_OPERAND_CHARS, apply, call_result, evaluate, solve_steps, solve_trace


def test_apply_is_the_three_operators():
    assert [apply(7, op, -3) for op in "+-*"] == [4, 10, -21]


def test_precedence_and_left_to_right():
    assert solve_steps("37*48+19=") == [(37, "*", 48, 1776), (1776, "+", 19, 1795)]
    assert solve_steps("5-3-1=") == [(5, "-", 3, 2), (2, "-", 1, 1)]
    assert solve_steps("2+3*4*5=") == [(3, "*", 4, 12), (12, "*", 5, 60), (2, "+", 60, 62)]
    assert solve_steps("12-74*1=")[-1] == (12, "-", 74, -62)


def test_the_trace_records_which_earlier_calls_feed_each_call():
    assert [step[4] for step in solve_trace("2*3+4*5")] == [(), (), (0, 1)]
    assert [step[4] for step in solve_trace("1+2+3*4")] == [(), (), (1, 0)]  # 3*4 first, then 1+2, then their sum


def test_the_tool_answers_one_well_formed_operation_only():
    assert call_result("[37*48]") == 1776 and call_result(" [-5-7] ") == -12
    big = "9" * (MAX_OPERAND_CHARS + 1)
    for junk in ["[37*48+19]", "[x]", "37*48", "[37/48]", "A:1776", f"[{big}+1]"]:
        assert call_result(junk) is None, junk


@pytest.mark.parametrize("text, value", [("3*5+7", 22), ("7-(5-3)", 5), (" (3+5)*7 ", 56)])
def test_a_legal_expression_over_exactly_the_numbers_has_its_value(text, value):
    assert evaluate(text, [3, 5, 7]) == value


@pytest.mark.parametrize("text", ["3*5+7+7", "3*5", "15+7", "-3+5*7", "3/5+7", "3**5+7", "3*5+7.0", "True*22", ""])
def test_anything_else_has_no_value(text):
    assert evaluate(text, [3, 5, 7]) is None
