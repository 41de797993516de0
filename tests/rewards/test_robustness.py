"""Every registered reward function on the inputs that break parsers: an empty completion, text that was not
UTF-8 (a lone surrogate, as `surrogateescape` decodes bad bytes), and a million characters. Each gets a finite
float or None, never an exception or NaN (a regex with catastrophic backtracking would not finish)."""
import math
import signal

import pytest

from workbench import registry

import workbench.recipes  # noqa: F401  (registers every component)

BAD = ["", "caf\udce9 <think>\udcff</think>", "<think>" + "wait, " * 200_000 + "</think>A:5", "x" * 1_000_000]
REWARDS = sorted(e.key for e in registry.entries() if e.kind == "reward")


def columns(completions):
    n = len(completions)
    return dict(prompts=["3 5 7>22:"] * n, completion_ids=[[7] * min(len(c) + 1, 2_000_000) for c in completions],
                answer=["5"] * n, solution=["5"] * n, target=["A:5"] * n, scores=[0.0] * (n - 1) + [1.0],
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
