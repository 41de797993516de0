"""RLVMR's advantage: episode advantage (invalid steps penalized) plus w x tag-grouped step advantages."""
import pytest
import torch

from tests.helpers import D, make_batch
from workbench import registry
from workbench.advantages.group import grpo, keyed_normalize
from workbench.advantages.rlvmr import rlvmr

pytestmark = pytest.mark.covers("rlvmr")


def agent_batch(rewards, groups, outputs, valid=None, scores=None, tokens_per_step=2):
    """Rows whose steps have the given action texts (tool_error where `valid` is False), `tokens_per_step` policy
    tokens per step, right-padded, with turn ids per token."""
    steps = [len(o) for o in outputs]
    b = make_batch(rewards, groups, [n * tokens_per_step for n in steps])
    T = b.mask.shape[1]
    turn = (torch.arange(T) // tokens_per_step)[None].expand(len(rewards), T).clone()
    b.turn = torch.where(b.mask > 0, turn, torch.full_like(turn, -1))
    valid = valid or [[True] * n for n in steps]
    b.turn_info = [[{"action": a, "tool_error": None if ok else "bad", "state": None} for a, ok in zip(o, v)]
                   for o, v in zip(outputs, valid)]
    b.scores = torch.tensor(scores if scores is not None else rewards, dtype=D)
    return b


def per_step(A, b, tokens_per_step=2):
    """[B, S] the advantage on each step's tokens (checked constant within the step)."""
    S = max(len(t) for t in b.turn_info)
    out = torch.zeros(b.size, S, dtype=D)
    for i, row in enumerate(b.turn_info):
        for s in range(len(row)):
            tokens = A[i, s * tokens_per_step:(s + 1) * tokens_per_step]
            assert torch.all(tokens == tokens[0])
            out[i, s] = tokens[0]
    return out


OUTPUTS = [["<planning>[2*3]", "<explore>[4*5]", "A:26"], ["<explore>[4*5]", "<explore>[4*5]"],
           ["<planning>[2*3]", "<reflection>[1+1]"], ["<explore>[9*9]", "<planning>x", "A:1"],
           ["<explore>[1*1]"], ["<planning>[3*3]", "<explore>[3*3]", "A:9", "A:9"]]
REWARDS = [1.0, 0.0, 0.0, 1.0, 0.0, 1.0]
GROUPS = [0, 0, 0, 1, 1, 1]


def test_registered_with_the_run_scripts_defaults():
    e = registry.get("advantage", "rlvmr")
    assert {"w": 1.0, "mode": "mean_std_norm", "invalid_penalty": 0.1, "episode_stats": "steps"}.items() <= \
        e.defaults.items()
    assert e.equation and set(e.reads) >= {"turn", "turn_info", "scores"}


def test_w_zero_is_grpo():
    b = agent_batch(REWARDS, GROUPS, OUTPUTS)
    A = rlvmr(b, w=0.0, invalid_penalty=0.0, episode_stats="trajectory")
    torch.testing.assert_close(A, grpo(b), rtol=0, atol=1e-12)
    one_step = agent_batch(REWARDS, GROUPS, [["<explore>a"], ["<planning>b"], ["c"], ["<explore>a"], ["d"], ["e"]])
    torch.testing.assert_close(rlvmr(one_step, w=0.0), grpo(one_step), rtol=0, atol=1e-12)  # steps = rows


@pytest.mark.parametrize("mode", ["mean_std_norm", "mean_norm"])
def test_step_advantage_is_zero_when_a_task_tag_group_is_all_equal(mode):
    # every explore step new (reward 1), every planning step in a failed episode (reward 0)
    outputs = [["<explore>[1*1]", "<planning>a"], ["<explore>[2*2]", "<planning>b"], ["<explore>[3*3]"]]
    b = agent_batch([0.0, 0.0, 0.0], [0, 0, 0], outputs)
    with_steps, episode_only = rlvmr(b, w=1.0, mode=mode), rlvmr(b, w=0.0, mode=mode)
    torch.testing.assert_close(with_steps, episode_only, rtol=0, atol=1e-12)


@pytest.mark.parametrize("mode", ["mean_std_norm", "mean_norm"])
def test_step_advantages_are_rewards_normalized_within_task_and_tag(mode):
    b = agent_batch(REWARDS, GROUPS, OUTPUTS)
    a_step = per_step(rlvmr(b, w=1.0, mode=mode), b) - per_step(rlvmr(b, w=0.0, mode=mode), b)
    # group 0 explore steps: rows 0/s1 (new, 1), 1/s0 (new, 1), 1/s1 (repeat, 0) -> rewards (1, 1, 0)
    explore = torch.tensor([a_step[0, 1], a_step[1, 0], a_step[1, 1]])
    centred = torch.tensor([1.0, 1.0, 0.0], dtype=D) - 2 / 3
    expected = centred if mode == "mean_norm" else centred / (torch.tensor([1.0, 1.0, 0.0], dtype=D).std() + 1e-6)
    torch.testing.assert_close(explore, expected, rtol=0, atol=1e-12)
    # group 1: planning steps 3/s1 and 5/s0, both in successful episodes: equal rewards -> 0
    assert a_step[3, 1] == 0 and a_step[5, 0] == 0
    if mode == "mean_norm":  # centred step advantages sum to zero in each group of two or more
        assert float(explore.sum()) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("mode", ["mean_std_norm", "mean_norm"])
def test_a_task_tag_group_of_one_step_keeps_its_reward(mode):
    # row 0's reflection follows its invalid first step with another action: reward 1, the only reflection of
    # prompt 0; the reference gives a group of one mean 0 and std 1
    b = agent_batch([0.0, 1.0], [0, 0], [["[2*", "<reflection>[2*3]"], ["<explore>[4*5]"]],
                    valid=[[False, True], [True]])
    a_step = per_step(rlvmr(b, w=1.0, mode=mode), b) - per_step(rlvmr(b, w=0.0, mode=mode), b)
    expected = 1.0 if mode == "mean_norm" else 1.0 / (1.0 + 1e-6)
    assert float(a_step[0, 1]) == pytest.approx(expected, rel=0, abs=1e-12)
    assert float(a_step[1, 0]) == pytest.approx(expected, rel=0, abs=1e-12)  # the explore group is one step too
    assert float(a_step[0, 0]) == 0.0  # the invalid step: tag "none", reward 0, alone in its group


def test_invalid_steps_lower_only_their_own_episode_score():
    outputs = [["[1*1]", "[2*", "A:1"], ["[1*1]", "A:1"]]
    b = agent_batch([1.0, 1.0], [0, 0], outputs, valid=[[True, False, True], [True, True]])
    A = per_step(rlvmr(b, w=0.0, mode="mean_norm"), b)
    # steps-as-samples: x = (1, 0.9, 1, 1, 1), mean 0.98
    torch.testing.assert_close(A[0], torch.tensor([0.02, -0.08, 0.02], dtype=D), rtol=0, atol=1e-12)
    torch.testing.assert_close(A[1, :2], torch.tensor([0.02, 0.02], dtype=D), rtol=0, atol=1e-12)
    T = per_step(rlvmr(b, w=0.0, mode="mean_norm", episode_stats="trajectory"), b)
    torch.testing.assert_close(T[0], torch.full((3,), -0.05, dtype=D), rtol=0, atol=1e-12)  # x = (0.9, 1)


def test_keyed_normalize_is_the_per_key_z_score_with_a_singleton_policy():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(40, generator=g, dtype=D)
    keys = [(int(k) % 4, "tag" if int(k) % 3 else None) for k in torch.randint(0, 12, (40,), generator=g)]
    keys[0] = "alone"
    for scale in (True, False):
        for singletons in ("keep", "zero"):
            out = keyed_normalize(x, keys, scale=scale, eps=1e-6, singletons=singletons)
            for key in set(keys):
                rows = [n for n, k in enumerate(keys) if k == key]
                v = x[rows]
                if len(rows) == 1:
                    alone = (v / (1 + 1e-6) if scale else v) if singletons == "keep" else torch.zeros_like(v)
                    torch.testing.assert_close(out[rows], alone, rtol=0, atol=0)
                else:
                    z = (v - v.mean()) / (v.std() + 1e-6) if scale else v - v.mean()
                    torch.testing.assert_close(out[rows], z, rtol=0, atol=1e-12)
    x = torch.tensor([1.0, 2.0, 3.0, 5.0], dtype=D)
    torch.testing.assert_close(keyed_normalize(x, ["a", "a", "a", "b"], scale=False),
                               torch.tensor([-1.0, 0.0, 1.0, 5.0], dtype=D))
    with pytest.raises(ValueError, match="singletons"):
        keyed_normalize(x, ["a"] * 4, singletons="drop")
    with pytest.raises(ValueError, match="3 keys for 4 values"):
        keyed_normalize(x, ["a"] * 3)


def test_bad_inputs_are_refused():
    b = agent_batch(REWARDS, GROUPS, OUTPUTS)
    with pytest.raises(ValueError, match="episode_stats"):
        rlvmr(b, episode_stats="tokens")
    with pytest.raises(ValueError, match="mode"):
        rlvmr(b, mode="zscore")
    b.turn[0, 0] = 7
    with pytest.raises(ValueError, match="turn id"):
        rlvmr(b)
