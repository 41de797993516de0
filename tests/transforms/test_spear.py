"""SPEAR's self-imitation buffer: rows above their group mean kept for tolerate_steps, replayed with A = R - p50(group
means) > 0 once more than 1.5 x capacity of them beat it; agreement with the reference's TrajectoryBufferBatch."""
import copy
import random

import numpy as np
import pytest
import torch

from tests.helpers import group_batch, step_context
from workbench import registry
from workbench.advantages.spear import spear_advantage
from workbench.transforms.spear import (check_spear_buffer, lower_power_of_two, p50, push_history, recalibrated,
                                        spear_buffer)

pytestmark = pytest.mark.covers("spear")
G = 4


# ---------------------------------------------------------------------------------------------------------------------
# Transcribed from TencentYoutuResearch/SPEAR @ 7e8431513165640b4b1f78d09ebaae8807ee4f85,
# verl/verl/trainer/ppo/ray_trainer_hybrid.py, class TrajectoryBufferBatch (L149-527), the
# weight_decay_trajectory_replay = -1 path of the shipped scripts, with DataProto reduced to each row's summed reward
# and the calls of `critic_warmup` (L744-790). compute_grpo_outcome_advantage (verl/verl/trainer/ppo/core_algos.py
# L262-341) is inlined: its group branch for the step's advantages, its custom_reward_mean_std branch in
# prepare_for_selection. The tool-call check of update_batch is left out (our require_tool_call=False). Printing and
# non-tensor bookkeeping dropped.

def nearest_lower_power_of_2(n):
    if n <= 1:
        return 0
    return 1 << (n.bit_length() - 1)


class RefTrajectoryBufferBatch:
    def __init__(self, buffer_size=2048, baseline_buffer_size=10240, tolerate_steps=10, norm_adv_by_std_in_grpo=False):
        self.buffer_size = buffer_size
        self.baseline_buffer_size = baseline_buffer_size
        self.tolerate_steps = min(tolerate_steps, 10)
        self.trajectory_buffer = []
        self.reward_mean_history = []
        self.reward_std_history = []
        self.norm_adv_by_std_in_grpo = norm_adv_by_std_in_grpo

    def remove_old(self):
        if len(self.trajectory_buffer):
            step_latest = self.trajectory_buffer[-1][-1]
            self.trajectory_buffer = [
                item for item in self.trajectory_buffer if abs(item[-1] - step_latest) <= self.tolerate_steps
            ]

    def is_full_capacity(self):
        return self.get_buffer_size() > self.buffer_size * 1.5

    def maintain_reward_statistics(self):
        reward_mean_history_flatten, reward_std_history_flatten = [], []
        for item in self.reward_mean_history:
            reward_mean_history_flatten += item[1]
        for item in self.reward_std_history:
            reward_std_history_flatten += item[1]
        return np.percentile(reward_mean_history_flatten, 50), np.percentile(reward_std_history_flatten, 50)

    def prepare_for_selection(self, reward_tensor_concat, reward_mean_50p, reward_std_50p, epsilon=1e-6):
        scores = reward_tensor_concat.clone()
        for i in range(scores.shape[0]):
            if self.norm_adv_by_std_in_grpo:
                scores[i] = (scores[i] - reward_mean_50p) / (reward_std_50p + epsilon)
            else:
                scores[i] = scores[i] - reward_mean_50p
        mask = scores > 0
        return reward_tensor_concat[mask], scores[mask]

    def get_buffer(self):
        """(positive rewards, their advantages, how many the reference draws at random among them)."""
        assert len(self.trajectory_buffer) >= 1
        reward_tensor_concat = torch.cat([pair[0] for pair in self.trajectory_buffer], dim=0)
        reward_mean_50p, reward_std_50p = self.maintain_reward_statistics()
        rewards, advantages = self.prepare_for_selection(reward_tensor_concat, reward_mean_50p, reward_std_50p)
        len_batch_valid = min(nearest_lower_power_of_2(advantages.size(0)), self.buffer_size)
        return rewards, advantages, len_batch_valid

    def reset_buffer(self):
        self.trajectory_buffer = []

    def update_batch(self, reward_tensor_sum, group_size, global_step):
        rm_scores = reward_tensor_sum.view(-1, group_size)
        in_group_std = rm_scores.std(dim=-1)
        in_group_mean = rm_scores.mean(dim=-1)
        num_group_mean_all = sum([len(item[1]) for item in self.reward_mean_history])
        while num_group_mean_all > self.baseline_buffer_size and len(self.reward_mean_history):
            self.reward_mean_history.pop(0)
            self.reward_std_history.pop(0)
            num_group_mean_all = sum([len(item[1]) for item in self.reward_mean_history])
        self.reward_mean_history.append([global_step, in_group_mean.tolist()])
        self.reward_std_history.append([global_step, in_group_std.tolist()])
        # the step's advantages: compute_grpo_outcome_advantage's group branch, norm_adv_by_std_in_grpo as configured
        mean = in_group_mean.repeat_interleave(group_size)
        advantages = reward_tensor_sum - mean
        if self.norm_adv_by_std_in_grpo:
            advantages = advantages / (in_group_std.repeat_interleave(group_size) + 1e-6)
        mask = advantages > 0
        if mask.sum() == 0:
            return
        self.trajectory_buffer.append([reward_tensor_sum[mask], global_step])

    def get_buffer_size(self):
        num_buffer = 0
        if len(self.reward_mean_history):
            reward_mean_history = []
            for reward_item in self.reward_mean_history:
                reward_mean_history += reward_item[1]
            reward_mean_50p = np.percentile(reward_mean_history, 50)
        else:
            reward_mean_50p = None
        for reward_tensor_sum, _ in self.trajectory_buffer:
            if reward_mean_50p is None:
                pos = reward_tensor_sum > reward_tensor_sum.mean()
            else:
                pos = reward_tensor_sum > reward_mean_50p
            num_buffer += int(pos.sum())
        return num_buffer


def ref_step(ref: RefTrajectoryBufferBatch, rewards: torch.Tensor, global_step: int):
    """critic_warmup's order: replay (if full) and reset, then remove_old and update_batch."""
    replay = None
    if ref.is_full_capacity():
        replay = ref.get_buffer()
        ref.reset_buffer()
    ref.remove_old()
    ref.update_batch(rewards, G, global_step)
    return replay
# ---------------------------------------------------------------------------------------------------------------------


def step(rewards, n_step, state, *, completions=None, turn_info=None, **kw):
    batch = group_batch(rewards, [i // G for i in range(len(rewards))])
    batch.scores, batch.prompts = batch.rewards.clone(), [f"p{n_step}-{i // G}" for i in range(len(rewards))]
    batch.completions = completions or [f"s{n_step}r{i}" for i in range(len(rewards))]
    batch.turn_info = turn_info or []
    ctx = step_context(step=n_step, group_size=G, prompts_per_step=len(rewards) // G, state=state)
    return spear_buffer(batch, ctx, **kw), ctx


def replayed_rows(out):
    return torch.nonzero((out.offpolicy_mask > 0).any(-1)).flatten()


def random_rewards(rng, groups=3):
    return [rng.choice([0.0, 0.0, 0.25, 0.5, 1.0]) for _ in range(groups * G)]


@pytest.mark.parametrize("norm_by_std", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_agrees_with_the_reference_buffer_step_by_step(seed, norm_by_std):
    """Same trigger steps, same positive set and recalibrated advantages, same draw size; the replayed rows are a
    subset of the reference's positive rows with their advantages."""
    rng, state = random.Random(seed), {}
    kw = dict(capacity=4, tolerate_steps=2, baseline_buffer_size=7, norm_by_std=norm_by_std)
    ref = RefTrajectoryBufferBatch(buffer_size=4, baseline_buffer_size=7, tolerate_steps=2,
                                   norm_adv_by_std_in_grpo=norm_by_std)
    replays = 0
    for t in range(25):
        rewards = random_rewards(rng)
        theirs = ref_step(ref, torch.tensor(rewards, dtype=torch.float64), t + 1)
        out, ctx = step(rewards, t, state, **kw)
        rows = replayed_rows(out)
        if theirs is None:
            assert rows.numel() == 0, t
            continue
        ref_rewards, ref_adv, k = theirs
        assert rows.numel() == k, t
        ours_adv = spear_advantage(out)[rows, 0]
        assert torch.equal(out.rewards[rows] - out.baseline_rewards[rows] > 0, torch.ones(k, dtype=torch.bool))
        pairs = {(round(float(r), 9), round(float(a), 6)) for r, a in zip(ref_rewards, ref_adv)}
        assert {(round(float(r), 9), round(float(a), 6)) for r, a in zip(out.rewards[rows], ours_adv)} <= pairs
        replays += k > 0
        assert [s for s, _ in state["means"]] == [s - 1 for s, _ in ref.reward_mean_history]  # same history
    assert replays >= 2  # the comparison exercised replays


def test_p50_history_and_power_of_two_by_hand():
    h = push_history([], 0, [0.0, 0.5], size=3)
    h = push_history(h, 1, [1.0, 0.25], size=3)
    assert p50(h) == pytest.approx(0.375)  # median of 0, 0.25, 0.5, 1
    h = push_history(h, 2, [0.75], size=3)  # 4 > 3 held: step 0 leaves before step 2 is added
    assert [s for s, _ in h] == [1, 2] and p50(h) == 0.75
    assert [lower_power_of_two(n) for n in (0, 1, 2, 3, 7, 8, 9)] == [0, 0, 2, 2, 4, 8, 8]
    torch.testing.assert_close(recalibrated(torch.tensor([1.0, 0.2]), 0.5, None), torch.tensor([0.5, -0.3],
                                                                                                dtype=torch.float64))
    torch.testing.assert_close(recalibrated(torch.tensor([1.0]), 0.5, 0.25), torch.tensor([0.5 / (0.25 + 1e-6)],
                                                                                           dtype=torch.float64))


def test_every_replayed_sample_has_a_positive_advantage():
    """Card test 2: stored rows below the baseline b (but above their own group mean) are dropped at replay."""
    state = {}
    for t in range(2):  # group means 0.5 and 0.0625: b = 0.28125; the 0.25 rows beat their group's mean, not b
        out, ctx = step([1.0, 1.0, 0.0, 0.0] + [0.25, 0.0, 0.0, 0.0], t, state, capacity=2, tolerate_steps=5)
        assert replayed_rows(out).numel() == 0 and ctx.metrics["spear/replayable"] == 2.0 * t
    assert [e.reward for e in state["buffer"].entries] == [1.0, 1.0, 0.25] * 2
    out, ctx = step([0.0] * 8, 2, state, capacity=2, tolerate_steps=5)  # 4 rows beat b: more than 1.5 x 2
    rows = replayed_rows(out)
    assert rows.numel() == 2 and ctx.metrics["spear/replayed_rows"] == 2.0  # 2^2 = 4 positive, at most capacity
    A = spear_advantage(out)
    assert (A[rows, 0] > 0).all() and torch.equal(out.rewards[rows], torch.ones(2, dtype=out.rewards.dtype))
    torch.testing.assert_close(A[rows, 0], torch.full((2,), 1 - 0.28125, dtype=A.dtype))
    assert ctx.metrics["spear/baseline"] == pytest.approx(0.28125)
    assert len(state["buffer"]) == 0  # emptied by the replay; step 2 has no row above its group mean
    assert out.group[rows].unique().tolist() == [2]  # one extra group after the step's two


def test_entries_older_than_the_tolerance_are_evicted():
    """Card test 3: after the store of step t, every entry is within tolerate_steps of the previous step."""
    state, tol = {}, 2
    step([1.0, 0.0, 0.0, 0.0], 0, state, tolerate_steps=tol)
    for t in range(1, 8):
        step([0.0] * G, t, state, tolerate_steps=tol)
        steps = {e.step for e in state["buffer"].entries}
        assert all((t - 1) - s <= tol for s in steps)
        assert steps == ({0} if t <= tol + 1 else set())
    assert state["buffer"].evicted == 1


def test_the_fresh_rows_get_dr_grpo_and_nothing_replays_before_the_trigger():
    state = {}
    out, ctx = step([1.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.0, 1.0], 0, state)
    assert out.size == 8 and not (out.offpolicy_mask > 0).any()
    A = spear_advantage(out)[:, 0]
    torch.testing.assert_close(A, torch.tensor([0.75, -0.25, -0.25, -0.25, 0.0, 0.0, -0.5, 0.5], dtype=A.dtype))
    assert ctx.metrics == {"spear/replayable": 0.0, "spear/buffer_rows": 2.0, "spear/replayed_rows": 0.0}


def test_the_tool_call_requirement_stores_only_rows_that_called_a_tool():
    state, rewards = {}, [1.0, 1.0, 0.0, 0.0]
    calls = [[{"action": "[Bov]", "tool_error": None}, {"action": "A:Zar"}], [{"action": "A:Zar"}], [{}], [{}]]
    step(rewards, 0, state, turn_info=calls, require_tool_call=True)
    assert [e.row.completions for e in state["buffer"].entries] == [["s0r0"]]


def test_a_resumed_run_replays_the_same_rows():
    state = {}
    for t in range(4):
        step([1.0, 0.0, 0.5, 0.0, 1.0, 1.0, 0.0, 0.0], t, state, capacity=4)
    a, _ = step([0.0] * 8, 4, copy.deepcopy(state), capacity=4)
    b, _ = step([0.0] * 8, 4, copy.deepcopy(state), capacity=4)
    assert replayed_rows(a).numel() == 4 and a.completions == b.completions


def test_registration_and_bad_settings():
    entry = registry.get("group_transform", "spear")
    assert entry.defaults == {"capacity": 2048, "tolerate_steps": 5, "baseline_buffer_size": 10240, "threshold": 0.0,
                              "norm_by_std": False, "require_tool_call": False, "trigger": 1.5}
    assert entry.title == registry.catalog()["spear"]["title"] and entry.state is dict
    for bad, message in (({"capacity": 0}, "capacity must be an integer >= 1"),
                         ({"tolerate_steps": 11}, "caps trajectory_tolerate_steps at 10"),
                         ({"tolerate_steps": -1}, "max_age must be an integer >= 0"),
                         ({"baseline_buffer_size": 0}, "baseline_buffer_size must be an integer >= 1"),
                         ({"threshold": float("inf")}, "threshold must be a finite number"),
                         ({"trigger": 0}, "trigger must be a number > 0"),
                         ({"norm_by_std": "no"}, "norm_by_std must be True or False"),
                         ({"require_tool_call": 1}, "require_tool_call must be True or False")):
        with pytest.raises(ValueError, match=message):
            check_spear_buffer(**bad)
