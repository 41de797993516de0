"""TRL's tool-call syntax: Hermes JSON, Python keywords and positional arguments; junk is a clear ValueError."""
import pytest

from workbench.text.tool_calls import CLOSE, OPEN, parse_tool_call


def test_tool_call_syntax_json_keywords_and_positional():
    assert parse_tool_call('<tool_call>{"name": "add", "arguments": {"n": 2}}</tool_call>') == ("add", [], {"n": 2})
    assert parse_tool_call("think<tool_call>add(n=2)</tool_call>") == ("add", [], {"n": 2})
    assert parse_tool_call("<tool_call>add(2)</tool_call>") == ("add", [2], {})
    assert parse_tool_call("the answer is 5") is None
    for bad in ["<tool_call>{oops}</tool_call>", "<tool_call>add(n=x)</tool_call>", "<tool_call>1+1</tool_call>"]:
        with pytest.raises(ValueError, match="malformed"):
            parse_tool_call(bad)


def test_the_last_call_of_an_action_is_the_one_read_and_an_unclosed_call_is_none():
    action = f'{OPEN}add(1){CLOSE} then {OPEN}{{"name": "mul", "arguments": {{"a": 2, "b": 3}}}}{CLOSE}'
    assert parse_tool_call(action) == ("mul", [], {"a": 2, "b": 3})
    assert parse_tool_call(f"{OPEN}add(1)") is None and parse_tool_call(f"add(1){CLOSE}") is None
