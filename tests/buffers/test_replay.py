"""The replay buffer: bounded (capacity, per prompt, age) with the oldest leaving first, rows stored without what
later stages derive again, draws fixed by the caller's random stream."""
import random

import pytest
import torch

from tests.helpers import group_batch
from workbench.buffers.replay import DERIVED, ReplayBuffer, check_buffer, entries_of, rows_of


def rows(rewards, prompts):
    b = group_batch(rewards, list(range(len(rewards))))
    b.prompts = list(prompts)
    b.old_logp, b.advantages = torch.zeros_like(b.mask), torch.ones_like(b.mask)
    return b


def test_capacity_is_never_exceeded_and_the_oldest_leave_first():
    buf = ReplayBuffer(capacity=3)
    for step in range(5):
        buf.add(entries_of(rows([1.0, 0.5], [f"p{step}a", f"p{step}b"]), [0, 1], step), step)
        assert len(buf) <= 3
    assert [e.key for e in buf.entries] == ["p3b", "p4a", "p4b"] and buf.added == 10 and buf.evicted == 7
    assert [e.step for e in buf.entries] == [3, 4, 4] and [e.reward for e in buf.entries] == [0.5, 1.0, 0.5]


def test_per_prompt_bound_keeps_each_prompts_newest_rows():
    buf = ReplayBuffer(capacity=100, per_key=2)
    for step in range(4):
        buf.add(entries_of(rows([float(step)] * 2, ["q", f"other{step}"]), [0, 1], step), step)
    assert [e.reward for e in buf.of_key("q")] == [2.0, 3.0]  # q's two newest; every other prompt once
    assert len(buf) == 2 + 4 and all(len(buf.of_key(f"other{s}")) == 1 for s in range(4))


def test_entries_older_than_max_age_leave_at_the_next_add():
    buf = ReplayBuffer(capacity=100, max_age=2)
    for step in range(6):
        buf.add(entries_of(rows([1.0], [f"s{step}"]), [0], step), step)
    assert [e.step for e in buf.entries] == [3, 4, 5]  # 5 - 3 = 2 <= max_age
    assert [x["age"] for x in buf.summary()["entries"]] == [2, 1, 0]


def test_stored_rows_drop_what_later_stages_derive_and_come_back_as_one_group():
    buf = ReplayBuffer(capacity=4)
    buf.add(entries_of(rows([1.0, 0.0, 1.0], ["a", "b", "c"]), [0, 2], 7), 7)
    assert all(getattr(e.row, name) is None for e in buf.entries for name in DERIVED)
    assert all(e.row.size == 1 and e.row.mask.sum() > 0 for e in buf.entries)
    batch = rows_of(buf.entries, group=5, pad_id=0)
    assert batch.size == 2 and batch.group.tolist() == [5, 5] and batch.prompts == ["a", "c"]
    assert batch.rewards.tolist() == [1.0, 1.0]


def test_draws_are_fixed_by_the_random_stream_and_can_be_limited_to_one_prompt():
    buf = ReplayBuffer(capacity=50)
    buf.add(entries_of(rows([float(i) for i in range(10)], [f"p{i % 3}" for i in range(10)]), range(10), 0), 0)
    a = [e.reward for e in buf.draw(4, random.Random("x"))]
    assert a == [e.reward for e in buf.draw(4, random.Random("x"))] and len(set(a)) == 4
    assert {e.key for e in buf.draw(10, random.Random(1), key="p1")} == {"p1"}
    assert len(buf.draw(10, random.Random(1), key="p1")) == 3 and buf.draw(2, random.Random(1), key="none") == []


@pytest.mark.parametrize("kw, match", [({"capacity": 0}, "capacity must be an integer >= 1.*stores nothing"),
                                       ({"capacity": 2.5}, "capacity must be an integer"),
                                       ({"capacity": 4, "per_key": 0}, "per_key must be an integer >= 1"),
                                       ({"capacity": 4, "max_age": -1}, "max_age must be an integer >= 0")])
def test_bounds_that_do_not_bound_are_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        check_buffer(**kw)
