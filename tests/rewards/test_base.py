"""What every reward function shares: reading TRL's completion formats, columns, progress and steps."""
from types import SimpleNamespace

import pytest

from workbench.rewards import base


def test_texts_reads_strings_and_the_assistants_messages_of_conversational_completions():
    chat = [{"role": "assistant", "content": "[2*3]"}, {"role": "tool", "content": "6"},
            {"role": "assistant", "content": "A:6"}]
    assert base.texts(["plain", [{"content": "one message"}], chat]) == ["plain", "one message", "[2*3]\nA:6"]
    with pytest.raises(TypeError, match="a completion is a string or a list of chat messages, got int"):
        base.texts([3])


def test_column_takes_the_first_alias_present_and_names_the_reward_when_none_is():
    assert base.column({"answer": None, "solution": ["4"]}, "answer", "solution") == ["4"]
    assert base.column({}, "answer") is None
    with pytest.raises(ValueError, match=r"reward 'mine' needs a 'answer' or 'solution' column; it got \['step'\]"):
        base.column({"step": 1}, "answer", "solution", required="mine")


def test_training_progress_from_our_step_or_trls_trainer_state():
    assert base.training_progress(step=5, total_steps=20) == 0.25
    assert base.training_progress(trainer_state=SimpleNamespace(global_step=30, max_steps=20)) == 1.0
    assert base.training_progress() == 0.0 and base.training_progress(step=3, total_steps=0) == 0.0


def test_actions_are_the_steps_texts_or_the_completion_itself():
    turn_info = [[{"action": "[2*3]"}, {"action": "A:6"}], []]
    assert base.actions(["[2*3]6\nA:6", "A:1"], turn_info=turn_info) == [["[2*3]", "A:6"], ["A:1"]]
    assert base.actions(["A:1"]) == [["A:1"]]


def test_log_goes_through_the_callers_log_metric_or_nowhere():
    seen = {}
    base.log({"log_metric": lambda name, value: seen.update({name: value})}, "calls", 2)
    base.log({}, "calls", 3)
    assert seen == {"calls": 2.0}
