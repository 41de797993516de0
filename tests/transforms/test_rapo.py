"""RAPO's replay: an all-fail group gets the latest stored success of its prompt (arpo-gui's rule with one stored row
per prompt), which makes its reward std > 0 and gives GRPO a positive advantage there."""
import copy

import pytest

from tests.helpers import group_batch, grouped_step
from workbench import registry
from workbench.advantages.group import group_stats, grpo
from workbench.transforms.rapo import check_rapo_replay, rapo_replay

pytestmark = pytest.mark.covers("rapo")
G = 4


def step(groups: dict, n_step: int = 0, state=None):
    """groups {prompt: rewards}: one group per prompt, in order; rewards = scores."""
    return grouped_step(rapo_replay, groups, n_step, state, G)


def test_an_injected_success_makes_an_all_fail_groups_std_positive():
    """Card test 2."""
    _, ctx = step({"q": [1.0, 0.0, 0.0, 0.0]})
    before = group_batch([0.0] * G, [0] * G)
    assert float(group_stats(before.rewards, before.group)[1][0]) == 0.0
    out, ctx = step({"q": [0.0] * G}, 1, ctx.state)
    _, std, _ = group_stats(out.rewards, out.group)
    assert float(std[0]) > 0 and out.rewards.tolist() == [1.0, 0.0, 0.0, 0.0]
    A = grpo(out)[:, 0]
    assert A[0] > 0 and (A[1:] < 0).all()
    assert ctx.metrics["replay/injected_groups"] == 1.0


def test_the_injected_row_is_the_latest_success_whatever_the_draw():
    state = {}
    _, ctx = step({"q": [1.0, 0.0, 0.0, 0.0]}, 0, state)
    _, ctx = step({"q": [0.0, 0.0, 0.9, 0.0]}, 1, ctx.state)  # the newer success (row 2 of step 1)
    for n in range(2, 8):  # different steps draw with different streams: always the latest
        out, _ = step({"q": [0.0] * G}, n, copy.deepcopy(ctx.state))
        assert out.completions[0] == "q:1:2" and out.rewards[0] == 0.9
    assert len(ctx.state["buffer"]) == 1


def test_a_failure_or_a_sub_threshold_reward_is_not_stored_and_groups_with_signal_are_untouched():
    _, ctx = step({"q": [0.4, 0.0, 0.0, 0.0]})  # 0.4 is not a success (> 0.5)
    assert len(ctx.state["buffer"]) == 0
    _, ctx = step({"q": [1.0, 1.0, 0.0, 0.0]}, 1, ctx.state)
    out, ctx = step({"q": [1.0, 0.0, 0.0, 0.0]}, 2, ctx.state)
    assert out.completions[0] == "q:2:0" and ctx.metrics["replay/injected_groups"] == 0.0


def test_registration_and_bad_settings():
    entry = registry.get("group_transform", "rapo")
    assert entry.defaults == {"capacity": 4096, "success": 0.5, "dead_std": 0.05, "dead_mean": 0.2}
    assert entry.title == registry.catalog()["rapo"]["title"]
    with pytest.raises(ValueError, match="capacity must be an integer >= 1"):
        check_rapo_replay(capacity=0)
    with pytest.raises(ValueError, match="success must be a reward threshold"):
        check_rapo_replay(success="high")
    with pytest.raises(ValueError, match="dead_std must be >= 0"):
        check_rapo_replay(dead_std=-1.0)
