"""ARPO (GUI)'s replay: an all-fail group gets a stored success of its prompt in place of its first row; groups with
any success are untouched; the buffer holds at most 8 rows per prompt, each with reward > 0.1."""
import pytest
import torch

from tests.helpers import grouped_step
from workbench import registry
from workbench.advantages.group import grpo
from workbench.buffers.replay import ReplayBuffer
from workbench.transforms.arpo_gui import arpo_gui, check_arpo_gui

pytestmark = pytest.mark.covers("arpo-gui")
G = 4


def step(groups: dict, n_step: int = 0, state=None):
    """groups {prompt: rewards}: one group per prompt, in order; rewards = scores."""
    return grouped_step(arpo_gui, groups, n_step, state, G)


def test_an_all_fail_group_gets_one_stored_success_and_then_one_positive_advantage():
    _, ctx = step({"q": [1.0, 0.0, 0.0, 0.0], "r": [0.0] * G})         # step 0: q succeeds once, stored
    out, ctx = step({"q": [0.0] * G, "r": [0.0] * G}, 1, ctx.state)    # step 1: q fails throughout
    assert out.size == 2 * G and out.rewards.tolist() == [1.0, 0.0, 0.0, 0.0] + [0.0] * G
    assert out.completions[:G] == ["q:0:0", "q:1:1", "q:1:2", "q:1:3"]  # the stored row from step 0, then step 1's
    assert out.group.tolist() == [0] * G + [1] * G and out.prompts[:G] == ["q"] * G
    A = grpo(out)[:, 0]
    assert (A[:G] > 0).sum() == 1 and A[0] > 0 and torch.allclose(A[1:G], A[1].expand(G - 1)) and A[1] < 0
    assert torch.equal(A[G:], torch.zeros(G))  # r never succeeded: nothing to replay, A stays 0
    assert ctx.metrics == {"replay/dead_groups": 1.0, "replay/injected_groups": 0.5, "replay/buffer_rows": 1.0}


def test_groups_with_a_success_or_spread_are_untouched():
    _, ctx = step({"q": [1.0, 1.0, 0.0, 0.0]})
    batch_groups = {"q": [0.0, 0.3, 0.0, 0.0], "q2": [1.0] * G}           # std > 0.05; mean >= 0.2
    out, ctx = step(batch_groups, 1, ctx.state)
    assert out.rewards.tolist() == [0.0, 0.3, 0.0, 0.0] + [1.0] * G and ctx.metrics["replay/injected_groups"] == 0


def test_the_buffer_keeps_at_most_8_successes_per_prompt_all_above_the_threshold():
    state = {}
    for n in range(5):
        _, ctx = step({"q": [1.0, 0.5, 0.1, 0.0], "z": [0.05, 0.2, 0.0, 0.0]}, n, state)
    buffer: ReplayBuffer = ctx.state["buffer"]
    assert len(buffer.of_key("q")) == 8 and len(buffer.of_key("z")) == 5
    assert all(e.reward > 0.1 for e in buffer.entries) and {e.step for e in buffer.of_key("q")} == {1, 2, 3, 4}


def test_replayed_rows_are_the_same_on_a_resumed_run():
    """Draws come from the component's stream (seed, step, round, component): a copy of the state draws alike."""
    import copy

    _, ctx = step({"q": [1.0, 0.5, 0.0, 0.0]})
    _, ctx = step({"q": [0.9, 0.0, 0.0, 0.0]}, 1, ctx.state)
    a, _ = step({"q": [0.0] * G}, 2, copy.deepcopy(ctx.state))
    b, _ = step({"q": [0.0] * G}, 2, copy.deepcopy(ctx.state))
    assert a.rewards.tolist() == b.rewards.tolist() and a.completions == b.completions


def test_registration_and_bad_settings():
    entry = registry.get("group_transform", "arpo-gui")
    assert entry.defaults == {"per_task": 8, "capacity": 4096, "success": 0.1, "dead_std": 0.05, "dead_mean": 0.2}
    with pytest.raises(ValueError, match="capacity must be an integer >= 1"):
        check_arpo_gui(capacity=0)
    with pytest.raises(ValueError, match="per_key must be an integer >= 1"):
        check_arpo_gui(per_task=0)




@pytest.mark.skipif(__import__("sys").platform == "win32", reason="POSIX signals")
def test_a_killed_process_resumes_with_the_same_pool_and_buffer_and_logs_the_straight_runs_rows(tmp_path):
    """A real process killed (SIGKILL) after its step-3 checkpoint and run again: the pool's epoch order and the
    buffer come back from pipeline.pt, so every later row (replays included) is the uninterrupted run's."""
    from tests.helpers import killed_after_checkpoint, metric_rows, small_run_args
    from workbench import cli

    def args(out):  # an untrained model: store every row (reward > -1)
        return small_run_args("arpo-gui", out) + ["--set", "recipe_overrides.group_transforms.success=-1.0"]
    killed_after_checkpoint(args(tmp_path / "resumed"), step=3)
    assert len(metric_rows(tmp_path / "resumed")) == 3
    assert cli.main(args(tmp_path / "resumed")) == 0 and cli.main(args(tmp_path / "straight")) == 0
    rows = metric_rows(tmp_path / "straight")
    assert metric_rows(tmp_path / "resumed") == rows and len(rows) == 6
    assert all(r["replay/buffer_rows"] > 0 for r in rows) and any(r["replay/injected_groups"] > 0 for r in rows[3:])
