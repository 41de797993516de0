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
        values = fn(BAD, **{**columns(BAD), **supplied(key, len(BAD))})
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

# plain completions that different rewards score differently (answers, formats, reflection words, written calls)
PLAIN = ["A:5", "<think>x</think>A:5", "", "<think>hmm, wait</think>\n[2+3] 5 A:5", "<think>so 5</think>\\boxed{5}",
         "I think 3+2=5.\nA:6", "Let me check again. <answer>5</answer>"]

# rewards that read a column only their own pipeline part supplies (SSP's success rate: its group transform runs the
# solver), and what it is, per row
SUPPLIED = {"ssp": lambda n: {"success_rate": [0.5] * n, "scores": [1.0] * n}}


def supplied(key: str, n: int) -> dict:
    return SUPPLIED[key](n) if key in SUPPLIED else {}


# rewards that need what TRL does not pass: the argument that supplies it (their length budget)
BUDGET = {"hbpo-reward": {"max_len": 64}, "length-bias": {"max_len": 64}, "soft-overlong": {"max_completion_len": 64}}
# rewards that legitimately cannot read TRL's structured tool calls, and why
TEXT_CALLS_ONLY = {
    "cm2-checklist": "its checklist is about calculator calls written in the text ('[a op b]'); structured "
                     "tool_calls carry no such text, so reading the content would silently find no call",
    "rl4mle-milestones": "its milestones are the results of calculator calls written in the text; structured "
                         "tool_calls carry no such text, so reading the content would silently find no step",
}


def trl_columns(n):
    """What TRL's GRPOTrainer passes (no `scores`, `turn_info`, `max_new_tokens`, ...)."""
    return dict(prompts=[[{"role": "user", "content": "2+3="}]] * n, completion_ids=[[7, 8, 2]] * n,
                solution=["5"] * n, trainer_state=SimpleNamespace(global_step=3, max_steps=10),
                log_extra=lambda *a: None, log_metric=lambda *a: None)


def assert_values(key, values, n):
    assert len(values) == n, (key, values)
    for v in values:
        assert v is None or (isinstance(v, (int, float)) and math.isfinite(v)), (key, values)


@pytest.mark.parametrize("key", REWARDS)
def test_a_reward_reads_a_conversational_completion_as_its_plain_text(key):
    """TRL's conversational form [{"role": "assistant", "content": text}] (its rewards read completion[0]["content"])
    scores as the text itself, with only TRL's columns (plus the budget a BUDGET reward needs)."""
    fn = registry.get("reward", key).fn
    kw = {**trl_columns(len(PLAIN)), **BUDGET.get(key, {}), **supplied(key, len(PLAIN))}
    plain = fn(PLAIN, **kw)
    assert_values(key, plain, len(PLAIN))
    assert fn([[{"role": "assistant", "content": text}] for text in PLAIN], **kw) == plain


@pytest.mark.parametrize("key", REWARDS)
def test_a_reward_takes_trls_columns_and_tool_calls_or_names_the_fix(key):
    """With only TRL's columns a reward scores TRL's completions (structured tool calls included), except the listed
    ones, which refuse with the fix: the length budget argument (BUDGET), text calls (TEXT_CALLS_ONLY)."""
    fn = registry.get("reward", key).fn
    if key in BUDGET:
        (arg,) = BUDGET[key]
        with pytest.raises(ValueError, match=rf"reward '{key}' needs its length budget: pass {arg}=<tokens>"):
            fn(CHATS, **trl_columns(len(CHATS)))
    if key in SUPPLIED:
        with pytest.raises(ValueError, match=rf"reward '{key}' needs .* which only the group transform {key}"):
            fn(CHATS, **trl_columns(len(CHATS)))
    kw = {**trl_columns(len(CHATS)), **BUDGET.get(key, {}), **supplied(key, len(CHATS))}
    if key in TEXT_CALLS_ONLY:
        with pytest.raises(ValueError, match=rf"reward '{key}' .*rows \[1\] carry structured tool_calls.*"
                                             "pass the episode as text"):
            fn(CHATS, **kw)
        text_only = [c for c in CHATS if not any("tool_calls" in m for m in c)]
        assert_values(key, fn(text_only, **{**trl_columns(len(text_only)), **BUDGET.get(key, {})}), len(text_only))
        return
    assert_values(key, fn(CHATS, **kw), len(CHATS))


@pytest.mark.parametrize("key", REWARDS)
def test_a_reward_of_an_empty_batch_is_empty(key):
    fn = registry.get("reward", key).fn
    assert list(fn([], **{**columns([]), **supplied(key, 0)})) == []
