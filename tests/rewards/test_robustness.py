"""Every registered reward function on the inputs that break parsers: an empty completion, text that was not
UTF-8 (a lone surrogate, as `surrogateescape` decodes bad bytes), and a million characters. Each gets a finite
float or None, never an exception or NaN (a regex with catastrophic backtracking would not finish). And as TRL
calls it: conversational completions (tool calls, tool messages), only TRL's columns, an empty batch."""
import math
import signal
from types import SimpleNamespace

import pytest

from workbench import registry

import workbench.recipes  # noqa: F401  (registers every component)

BAD = ["", "caf\udce9 <think>\udcff</think>", "<think>" + "wait, " * 200_000 + "</think>A:5", "x" * 1_000_000]
REWARDS = sorted(e.key for e in registry.entries() if e.kind == "reward")


def columns(completions):
    n = len(completions)
    return dict(prompts=["3 5 7>22:"] * n, completion_ids=[[7] * min(len(c) + 1, 2_000_000) for c in completions],
                answer=["5"] * n, solution=["5"] * n, target=["A:5"] * n, scores=([0.0] * (n - 1) + [1.0])[:n],
                truncated=[False] * n, turn_info=None, max_new_tokens=10, step=3, total_steps=10)


class Hung(Exception):
    pass


def _alarm(signum, frame):
    raise Hung


@pytest.mark.parametrize("key", REWARDS)
def test_a_reward_survives_empty_non_utf8_and_enormous_completions(key):
    fn = registry.get("reward", key).fn
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(60)  # a generous bound against a hang, not a timing
    try:
        values = fn(BAD, **columns(BAD))
    except Hung:
        pytest.fail(f"reward {key!r} did not finish on {len(BAD)} completions (catastrophic backtracking?)")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert len(values) == len(BAD)
    for v in values:
        assert v is None or (isinstance(v, (int, float)) and math.isfinite(v)), (key, values)


CHATS = [[{"role": "assistant", "content": "A:5"}],
         [{"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "add", "arguments": "{}"}}]},
          {"role": "tool", "content": "5"}, {"role": "assistant", "content": "<think>x</think>A:5"}],
         [{"role": "assistant", "content": ""}]]


def trl_columns(n):
    """What TRL's GRPOTrainer passes (no `scores`, `turn_info`, `max_new_tokens`, ...)."""
    return dict(prompts=[[{"role": "user", "content": "2+3="}]] * n, completion_ids=[[7, 8, 2]] * n,
                solution=["5"] * n, trainer_state=SimpleNamespace(global_step=3, max_steps=10),
                log_extra=lambda *a: None, log_metric=lambda *a: None)


def finite_or_clear_error(key, call):
    """Values of the right kind, or a ValueError that names the reward (a column it needs and TRL lacks)."""
    try:
        values = call()
    except ValueError as err:
        assert key in str(err), (key, str(err))
        return None
    for v in values:
        assert v is None or (isinstance(v, (int, float)) and math.isfinite(v)), (key, values)
    return values


@pytest.mark.parametrize("key", REWARDS)
def test_a_reward_reads_trls_conversational_completions_and_columns(key):
    fn = registry.get("reward", key).fn
    values = finite_or_clear_error(key, lambda: fn(CHATS, **trl_columns(len(CHATS))))
    assert values is None or len(values) == len(CHATS)


@pytest.mark.parametrize("key", REWARDS)
def test_a_reward_of_an_empty_batch_is_empty(key):
    fn = registry.get("reward", key).fn
    values = finite_or_clear_error(key, lambda: fn([], **columns([])))
    assert values is None or list(values) == []
