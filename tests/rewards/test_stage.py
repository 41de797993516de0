"""The reward stage's plumbing: UTF-8 repair, calling a reward function safely, metrics, unscorable rows."""
import math
import random

import pytest
import torch

from workbench.batch import RolloutBatch
from workbench.rewards.stage import RewardError, mask_unscorable, reward_metrics, run_reward, utf8_text

COLUMNS = {"completions": ["a", "b", "c"]}


def test_undecodable_text_becomes_valid_utf8():
    raw = "café".encode("latin-1")                        # b"caf\xe9": not UTF-8
    assert utf8_text(raw) == "caf\ufffd"
    assert utf8_text(raw.decode("utf-8", errors="surrogateescape")) == "caf\ufffd"  # lone surrogate \udce9
    assert utf8_text("\ud800x") == "?x" and utf8_text("fine ✓") == "fine ✓"
    utf8_text(raw.decode("utf-8", errors="surrogateescape")).encode("utf-8")  # never raises


def test_none_is_nan_and_log_metric_names_the_reward():
    metrics = {}

    def reward(completions, log_metric, **_):
        log_metric("calls", 1)
        return [1, None, 0.5]

    out = run_reward("mine", reward, COLUMNS, {}, metrics)
    assert out[0] == 1.0 and math.isnan(out[1]) and out[2] == 0.5 and metrics == {"rewards/mine/calls": 1.0}


@pytest.mark.parametrize("fn, message", [
    (lambda completions, **_: 1 / 0, r"reward 'bad' raised ZeroDivisionError: division by zero"),
    (lambda completions, **_: [1.0], r"reward 'bad' returned 1 values for 3 completions"),
    (lambda completions, **_: None, r"reward 'bad' returned None for 3 completions"),
    (lambda completions, **_: [1.0, "x", 0.0], r"reward 'bad' returned 'x' for row 1"),
    (lambda completions, **_: [1.0, float("inf"), float("nan")], r"reward 'bad' returned NaN/inf for rows \[1, 2\]"),
])
def test_a_failing_reward_is_named(fn, message):
    with pytest.raises(RewardError, match=message):
        run_reward("bad", fn, COLUMNS, {}, {})


def test_metrics_are_over_the_rows_a_reward_applies_to():
    table = torch.tensor([[1.0, math.nan], [0.0, 2.0], [1.0, math.nan]], dtype=torch.float64)
    m = reward_metrics(["task", "x"], table, torch.tensor([0.0, 0.0, 0.0]))
    assert m["rewards/task/mean"] == pytest.approx(2 / 3) and m["rewards/x/mean"] == 2.0
    assert m["rewards/x/std"] is None and m["rewards/task/std"] == pytest.approx(table[:, 0].std().item())
    assert m["rewards/unscorable_frac"] == 0.0


def test_unscorable_rows_train_on_nothing_and_take_their_groups_mean():
    batch = RolloutBatch.from_rewards([1.0, math.nan, 0.0, math.nan], group=[0, 0, 0, 1], lengths=[2, 2, 2, 2])
    out = mask_unscorable(batch, torch.isnan(batch.rewards))
    assert out.rewards.tolist() == [1.0, 0.5, 0.0, 0.0]
    assert out.mask.sum(-1).tolist() == [2.0, 0.0, 2.0, 0.0]


def test_the_columns_a_step_and_the_probe_give_are_the_ones_the_stage_table_names():
    from tests.helpers import make_batch, step_context
    from workbench.rewards.stage import probe_columns, reward_columns
    from workbench.stages import PASSED
    from workbench.tasks import get_task

    examples = get_task("addition").sample(2, random.Random(0))
    batch = make_batch([1.0, 0.0], [0, 1], completions=["1", "2"], prompts=[e.prompt for e in examples])
    batch.scores = batch.rewards.clone()
    step = reward_columns(batch, examples, step_context(max_new_tokens=4))
    assert set(step) | {"log_metric"} == set(PASSED["reward"])
    assert set(probe_columns(examples, 4, 1)) == set(step)
def test_a_rewards_return_is_checked_on_the_tasks_own_targets_and_a_raise_is_left_to_the_step():
    from workbench.rewards.stage import check_return, probe_columns
    from workbench.tasks import get_task

    columns = probe_columns(get_task("addition").sample(2, random.Random(0)), max_new_tokens=6, total_steps=4)
    assert len(columns["completions"]) == 2 and columns["completions"] == columns["target"]
    check_return("fine", lambda completions, **_: [1.0] * len(completions), columns, {})
    with pytest.raises(RewardError, match=r"reward 'short' returned 1 values for 2 completions"):
        check_return("short", lambda completions, **_: [1.0], columns, {})
    with pytest.raises(RewardError, match=r"reward 'text' returned 'ok' for row 0"):
        check_return("text", lambda completions, **_: ["ok", 1.0], columns, {})

    def needs_turns(completions, turn_info=None, **_):
        if turn_info is None:
            raise ValueError("needs turn_info")
        return [0.0] * len(completions)
    check_return("turns", needs_turns, columns, {})  # the stand-in rows lack what it reads: not judged
