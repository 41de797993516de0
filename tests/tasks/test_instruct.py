"""A task asked of an instruct model: answer rules (known values), the wrapper reduces to the task, system messages
open every episode, SFT targets follow the rule, and the settings are refused where they cannot apply."""
import random

import pytest

from workbench.tasks import get_task, run_task
from workbench.tasks.instruct import InstructTask, answer_tag, instructed, last_number
from workbench.train import make_config
from workbench.train.config import ConfigError
from workbench.train.sft import warm_start_key


@pytest.mark.parametrize("completion, read", [
    ("2 * 6 = 12.", "12"), ("The answer is 1,024 apples", "1024"), ("no number here", ""), ("x = -3", "-3"),
    ("+5", "5"), ("it costs 3.50 dollars", "3.50"), ("7 then 8\n9", "9"), ("", ""),
])
def test_last_number_reads_the_last_number(completion, read):
    assert last_number(completion) == read


@pytest.mark.parametrize("completion, read", [
    ("<answer>12</answer>", "12"), ("think <answer>1</answer> no, <answer> 2 </answer>", "2"),
    ("<answer>a\nb</answer>", "a\nb"), ("12", ""), ("<answer>12", ""),
])
def test_answer_tag_reads_the_last_tag(completion, read):
    assert answer_tag(completion) == read


def test_default_settings_are_the_task_itself():
    task = get_task("addition")
    assert instructed(task) is task
    assert run_task(make_config("smoke", task="addition")).__class__ is type(task)


def test_whole_with_a_system_prompt_scores_as_the_task():
    task = get_task("addition")
    wrapped = instructed(task, system_prompt="Add.")
    for example in task.eval_set(20):
        for completion in (example.target, example.target + " ", "0", "", " " + example.target):
            assert wrapped.score(completion, example) == task.score(completion.strip(), example)


def test_last_number_scores_a_sentence_ending_in_the_answer():
    task = get_task("addition")
    wrapped = instructed(task, answer_format="last_number")
    example = task.eval_set(1)[0]
    assert wrapped.score(f"The sum is {example.answer}.", example) == 1.0
    assert wrapped.score(f"{example.answer} is wrong, it is {int(example.answer) + 1}", example) == 0.0
    assert task.score(f"The sum is {example.answer}.", example) == 0.0  # what the rule adds


def test_examples_and_held_out_set_are_the_tasks():
    task = get_task("countdown")
    wrapped = instructed(task, system_prompt="Solve.", answer_format="last_number")
    assert wrapped.eval_set(5) == task.eval_set(5)
    assert wrapped.sample(4, random.Random(1)) == task.sample(4, random.Random(1))
    assert wrapped.name == task.name and wrapped.n_numbers == task.n_numbers  # knobs read through


def test_one_turn_episode_opens_with_the_system_message_and_is_scored_by_the_rule():
    task = get_task("addition")
    wrapped = instructed(task, system_prompt="Reply with the number.", answer_format="last_number")
    example = task.eval_set(1)[0]
    env = wrapped.make_env()
    messages, _ = env.reset(example)
    assert messages == [{"role": "system", "content": "Reply with the number."},
                        {"role": "user", "content": example.prompt}]
    assert wrapped.opening(example) == messages
    _, reward, done, _ = env.step(f"it is {example.answer}")
    assert (reward, done) == (1.0, True)


def test_answer_tag_sft_targets_are_tagged():
    task = get_task("addition")
    example = task.eval_set(1)[0]
    tagged = instructed(task, answer_format="answer_tag")
    assert tagged.expert_actions(example) == [f"<answer>{example.target}</answer>"]
    assert tagged.score(tagged.expert_actions(example)[0], example) == 1.0
    assert instructed(task, answer_format="last_number").expert_actions(example) == [example.target]


def test_multi_turn_env_takes_a_system_prompt_but_not_an_answer_rule():
    task = get_task("calculator")
    wrapped = instructed(task, system_prompt="Use the tool.")
    example = task.eval_set(1)[0]
    env = wrapped.make_env()
    messages, _ = env.reset(example)
    inner_messages, _ = task.make_env().reset(example)
    assert messages == [{"role": "system", "content": "Use the tool."}, *inner_messages]
    assert env.max_turns == task.make_env().max_turns and env.stop == task.make_env().stop
    twin = env.copy()
    twin.step("[1+1]")
    assert env.env.__dict__ != twin.env.__dict__  # the copy is its own episode
    with pytest.raises(ValueError, match="answer_format='last_number' applies to one-turn tasks.*calculator"):
        InstructTask(task, answer_format="last_number")


def test_config_refuses_a_system_prompt_without_a_chat_template():
    with pytest.raises(ConfigError, match="system_prompt is a chat message: set chat_template=true"):
        make_config("smoke", system_prompt="Be brief.")
    with pytest.raises(ConfigError, match="answer_format = 'last': must be one of 'whole', 'last_number'"):
        make_config("smoke", answer_format="last")


def test_warm_start_key_follows_the_prompt_and_target_format():
    plain = make_config("smoke")
    assert warm_start_key(plain) == warm_start_key(make_config("smoke", answer_format="whole"))  # old keys stay
    keys = {warm_start_key(plain), warm_start_key(make_config("smoke", answer_format="answer_tag")),
            warm_start_key(make_config("smoke", chat_template=True)),
            warm_start_key(make_config("smoke", chat_template=True, system_prompt="Be brief."))}
    assert len(keys) == 4
