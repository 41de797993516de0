"""What guidance reads from a task: solutions, hints of a fraction of them (known lengths), hinted episodes that are
scored as plain ones, and clear refusals (a fraction outside [0, 1], a template without its fields, no solution)."""
import random

import pytest

from tests.helpers import DigitFirst, no_solution_task
from workbench.tasks import get_task
from workbench.tasks.guidance import (GHPO_TEMPLATE, HintedTask, check_template, has_solutions, solution_actions,
                                      solution_hint, with_hint)


@pytest.mark.parametrize("fraction, length", [(0.0, 0), (0.25, 2), (0.5, 4), (0.75, 6), (1.0, 8), (0.3, 2)])
def test_a_hint_is_the_first_round_fraction_of_the_solutions_characters(fraction, length):
    actions = ["12+", "34=46"]  # 8 characters joined
    assert solution_hint(actions, fraction) == "12+34=46"[:length]
    assert len(solution_hint(actions, fraction)) == round(fraction * 8)


def test_hints_grow_with_the_fraction():
    text = "the whole worked solution, 41 characters"
    lengths = [len(solution_hint([text], f / 20)) for f in range(21)]
    assert lengths == sorted(lengths) and lengths[0] == 0 and lengths[-1] == len(text)


@pytest.mark.parametrize("fraction", [-0.1, 1.01, float("nan")])
def test_a_fraction_outside_zero_one_is_refused_naming_the_field(fraction):
    with pytest.raises(ValueError, match=r"fraction=.* is a fraction of the solution: give a number in \[0, 1\]"):
        solution_hint(["abc"], fraction)


@pytest.mark.parametrize("template, match", [
    ("{prompt}", "must contain both"), ("hint: {hint}", "must contain both"), ("{prompt}{hint}{x}", "cannot be filled"),
    ("{prompt}{hint}{", "cannot be filled"),
])
def test_a_template_must_place_prompt_and_hint(template, match):
    with pytest.raises(ValueError, match=match):
        check_template(template)
    assert check_template(GHPO_TEMPLATE) == GHPO_TEMPLATE


def test_the_hint_goes_into_the_last_user_message():
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "Q1"},
                {"role": "assistant", "content": "A"}, {"role": "user", "content": "Q2"}]
    out = with_hint(messages, "h", "{prompt} [{hint}]")
    assert out[3] == {"role": "user", "content": "Q2 [h]"} and out[:3] == messages[:3]
    assert messages[3]["content"] == "Q2"  # the caller's messages are not changed
    assert with_hint(messages, "", "{prompt} [{hint}]") == messages  # no hint, no change
    with pytest.raises(ValueError, match="nowhere to put a hint"):
        with_hint([{"role": "system", "content": "S"}], "h", "{prompt}{hint}")


def test_a_hinted_episode_opens_with_the_hint_and_is_scored_as_the_plain_one():
    task = get_task("addition")
    example = task.eval_set(1)[0]
    hinted = HintedTask(task, lambda e: solution_hint(solution_actions(task, e), 0.5), GHPO_TEMPLATE)
    messages, info = hinted.make_env().reset(example, 0)
    hint = example.target[:round(len(example.target) / 2)]
    assert messages == [{"role": "user", "content": GHPO_TEMPLATE.format(prompt=example.prompt, hint=hint)}]
    assert hinted.opening(example) == messages[0]["content"]  # a string, as the plain task's opening
    assert info == task.make_env().reset(example, 0)[1]  # the state is the plain episode's
    for answer in (example.target, "0"):
        env = hinted.make_env()
        env.reset(example, 0)
        assert env.step(answer)[1] == task.score(answer, example)
    assert hinted.eval_set(3) == task.eval_set(3)
    assert hinted.sample(2, random.Random(0)) == task.sample(2, random.Random(0))


def test_a_multi_turn_environment_keeps_its_observations_and_copies_with_the_hint():
    task = get_task("calculator")
    example = task.eval_set(1)[0]
    hinted = HintedTask(task, lambda e: "H", "{prompt}<{hint}>")
    env = hinted.make_env()
    messages, _ = env.reset(example, 0)
    plain = task.make_env().reset(example, 0)[0]
    assert messages[:-1] == plain[:-1] and messages[-1]["content"] == plain[-1]["content"] + "<H>"
    action = task.expert_actions(example)[0]
    twin = env.copy()
    assert twin.step(action) == env.step(action) and env.max_turns == task.make_env().max_turns


def test_solutions_are_the_expert_actions_and_a_task_without_one_has_none():
    assert solution_actions(get_task("addition"), get_task("addition").eval_set(1)[0]) == \
        [get_task("addition").eval_set(1)[0].target]
    assert has_solutions(get_task("calculator")) and has_solutions(DigitFirst())

    no_target = no_solution_task()
    assert not has_solutions(no_target)
    with pytest.raises(ValueError, match=r"task 'trl' has no solution for 'q'.*a target, or an expert trajectory"):
        solution_actions(no_target, no_target.eval_set()[0])
