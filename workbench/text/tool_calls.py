"""TRL's tool-call syntax, one call per action turn (the closing tag is the environment's stop string):

    <tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>     Hermes / Qwen JSON, as TRL parses
    <tool_call>add(a=2, b=3)</tool_call>                                      or a Python call of literals
    <tool_call>add(2, 3)</tool_call>                                          (positional arguments bind in order)

Read by the TRL environment adapter (`workbench.envs.trl`) and by the rewards that judge calls (`rewards.tools`,
`rewards.prs`), so a call counts for a reward exactly when the environment would run it.
"""
from __future__ import annotations

import ast
import json

OPEN, CLOSE = "<tool_call>", "</tool_call>"


def parse_tool_call(action: str) -> tuple[str, list, dict] | None:
    """(name, args, kwargs) of the action's tool call, None when it has none; ValueError when it is malformed."""
    if CLOSE not in action or OPEN not in action:
        return None
    body = action[action.rindex(OPEN) + len(OPEN):action.rindex(CLOSE)].strip()
    if body.startswith("{"):
        try:
            call = json.loads(body)
            return str(call["name"]), [], dict(call.get("arguments") or {})
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
            raise ValueError(f"malformed JSON tool call: {err}") from None
    try:
        node = ast.parse(body, mode="eval").body
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            raise ValueError("expected name(arguments)")
        return (node.func.id, [ast.literal_eval(a) for a in node.args],
                {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg is not None})
    except (SyntaxError, ValueError, RecursionError) as err:
        raise ValueError(f"malformed tool call {body[:60]!r}: {err}") from None
