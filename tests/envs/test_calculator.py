"""The calculator environment: exact verifier, one-operation tool, expert episodes that solve every example."""
import itertools
import random

import pytest

from workbench import registry
from workbench.envs.calculator import CalculatorEnv, longest_operand
from workbench.text.arithmetic import solve_steps
from workbench.tasks import Example, get_task

pytestmark = pytest.mark.covers("calculator")

TASK = get_task("calculator")


def play(env, example, actions):
    """(observations, rewards, dones, infos) of replaying `actions` after reset."""
    env.reset(example, 0)
    out = [env.step(a) for a in actions]
    return [o[0] for o in out], [o[1] for o in out], [o[2] for o in out], [o[3] for o in out]


def test_registered_as_task_and_env_with_its_knobs():
    entry = registry.get("env", "calculator")
    assert entry.fn is type(TASK) and entry.defaults == {"n_operands": 5, "digits": 2, "ops": "+-*", "slack": 2}
    assert isinstance(TASK.make_env(), CalculatorEnv) and TASK.make_env().stop == ("]",)
    with pytest.raises(ValueError, match="n_operands"):
        get_task("calculator", n_operands=1)


def test_the_tool_answers_one_operation_and_the_verifier_is_exact():
    ex = Example("37*48+19=", "1795", "A:1795")
    obs, rewards, dones, infos = play(TASK.make_env(), ex, ["[37*48]", "[1776+19]", "A:1795"])
    assert [o[0]["content"] for o in obs[:2]] == ["1776\n", "1795\n"] and obs[0][0]["role"] == "tool"
    assert rewards == [0.0, 0.0, 1.0] and dones == [False, False, True]
    assert [i["state"] for i in infos[:2]] == [("37*48+19=", (1776,)), ("37*48+19=", (1776, 1795))]
    # a call on the whole expression, or junk, is a tool error and changes nothing
    obs, rewards, dones, infos = play(TASK.make_env(), ex, ["[37*48+19]", "[x]", "A: 1795 "])
    assert obs[0][0]["content"] == "ERR\n" and infos[0]["tool_error"] and infos[1]["tool_error"]
    assert infos[1]["state"] == ("37*48+19=", ()) and rewards[-1] == 1.0  # surrounding spaces are fine
    for wrong in ["A:1796", "1795", "A:01795", "A:1795.0", ""]:
        assert play(TASK.make_env(), ex, [wrong])[1] == [0.0], wrong
    assert TASK.score("[37*48]1776\nA:1795", ex) == 1.0 and TASK.score("A:1795\nA:3", ex) == 0.0
    negative = Example("12-74*1=", "-62", "A:-62")
    assert play(TASK.make_env(), negative, TASK.expert_actions(negative))[1][-1] == 1.0


@pytest.mark.parametrize("kw", [{}, {"n_operands": 3, "digits": 3}, {"n_operands": 2, "ops": "*"}])
def test_expert_episodes_solve_every_example(kw):
    task = get_task("calculator", **kw)
    for ex in task.sample(100, random.Random(0)) + task.eval_set(50):
        actions = task.expert_actions(ex)
        assert len(actions) == task.n_operands and len(actions) <= task.max_turns
        _, rewards, dones, _ = play(task.make_env(), ex, actions)
        assert rewards[-1] == 1.0 and dones == [False] * (len(actions) - 1) + [True]
        assert task.score(ex.target, ex) == 1.0


def test_held_out_set_is_fixed_and_never_sampled():
    task, again = get_task("calculator"), get_task("calculator")
    held_out = {e.prompt for e in task.eval_set()}
    assert len(held_out) == 200 and [e.prompt for e in again.eval_set()] == [e.prompt for e in task.eval_set()]
    assert not held_out & {e.prompt for e in task.sample(500, random.Random(1))}


def test_digits_whose_operands_the_tool_refuses_are_refused_naming_the_limit():
    """digits=7: products of 7-digit numbers outgrow the tool's 12-character operands, so ~35% of the expert's
    calls returned ERR and the SFT data taught ignoring tool errors. Refused, with the settings that fit."""
    with pytest.raises(ValueError, match=r"calculator: digits=7, n_operands=5, ops='\+-\*' make the expert pass the "
                                         r"tool operands of up to 28 characters, but it refuses more than 12 .*use "
                                         r"digits <= 3 with n_operands=5 or n_operands <= 2 with digits=7 or "
                                         r"ops='\+-'"):
        get_task("calculator", digits=7)
    with pytest.raises(ValueError, match=r"operands of up to 13 characters"):  # 1 - 999999999999: 13 with the sign
        get_task("calculator", digits=12, n_operands=3, ops="-")
    with pytest.raises(ValueError, match=r"calculator: need 1 <= digits <= 12 .*got digits=13"):
        get_task("calculator", digits=13)


def expert_operands(n_operands, digits, ops):
    """Every operand the expert passes the tool, over every expression of numbers 1 or 10**digits - 1 (each operand
    is multilinear in the numbers, so its extremes are there) and every sequence of ops."""
    top = 10 ** digits - 1
    for numbers in itertools.product([1, top], repeat=n_operands):
        for signs in itertools.product(ops, repeat=n_operands - 1):
            expression = str(numbers[0]) + "".join(f"{op}{n}" for op, n in zip(signs, numbers[1:]))
            for a, _, b, _ in solve_steps(expression):
                yield a
                yield b


@pytest.mark.parametrize("ops", ["+", "-", "*", "+-", "+*", "-*", "+-*"])
def test_the_longest_operand_is_that_of_every_expression_the_knobs_draw(ops):
    for n_operands in (2, 3, 4, 5):
        for digits in (1, 2):
            worst = max(len(str(v)) for v in expert_operands(n_operands, digits, ops))
            assert longest_operand(n_operands, digits, ops) == worst, (n_operands, digits, ops)


@pytest.mark.parametrize("kw", [{"digits": 3}, {"digits": 11, "n_operands": 3, "ops": "+-"},
                                {"digits": 1, "n_operands": 13, "ops": "*"}])
def test_at_the_limit_no_expert_call_returns_an_error(kw):
    task = get_task("calculator", **kw)
    for ex in task.sample(200, random.Random(0)):
        _, rewards, _, infos = play(task.make_env(), ex, task.expert_actions(ex))
        assert rewards[-1] == 1.0 and not any(info.get("tool_error") for info in infos)
