"""GiGPO: episode advantage plus step advantages over anchor states."""
import math

import pytest
import torch

from tests.helpers import D, make_batch
from workbench import registry
from workbench.advantages.gigpo import gigpo, step_advantages, step_returns
from workbench.advantages.group import grpo


def agent_batch(rewards, groups, steps, tokens_per_step=2):
    """Rows of len(steps[i]) steps with `tokens_per_step` policy tokens each, right-padded; turn ids per token."""
    n_max = max(steps)
    b = make_batch(rewards, groups, [n * tokens_per_step for n in steps])
    T = b.mask.shape[1]
    turn = (torch.arange(T) // tokens_per_step)[None].expand(len(rewards), T).clone()
    b.turn = torch.where(b.mask > 0, turn, torch.full_like(turn, n_max + 5))
    return b


REW = [1.0, 0.0, 1.0, 0.0, 0.5, 0.25]
GRP = [0, 0, 0, 1, 1, 1]
STEPS = [3, 2, 4, 1, 3, 2]


def shared_states():
    return [["s0", "a", "goal"], ["s0", "b"], ["s0", "a", "c", "goal"],
            ["t0"], ["t0", "x", "y"], ["t0", "x"]]


@pytest.mark.covers("gigpo")
def test_gigpo_registered_with_verl_agent_defaults():
    e = registry.get("advantage", "gigpo")
    assert {"omega": 1.0, "gamma": 0.95, "mode": "mean_std_norm", "eps": 1e-6}.items() <= e.defaults.items()
    assert e.confidence == "partial" and e.equation


@pytest.mark.covers("gigpo")
@pytest.mark.parametrize("mode", ["mean_std_norm", "mean_norm"])
def test_gigpo_without_repeated_states_is_the_episode_advantage(mode):
    b = agent_batch(REW, GRP, STEPS)
    unique = [[f"r{i}s{s}" for s in range(n)] for i, n in enumerate(STEPS)]
    step_r = torch.randn(6, 4, generator=torch.Generator().manual_seed(0), dtype=D)
    A = gigpo(b, states=unique, step_rewards=step_r, omega=1.0, mode=mode)
    scale = "group" if mode == "mean_std_norm" else "none"
    assert torch.allclose(A, grpo(b, scale=scale), atol=1e-15)


@pytest.mark.covers("gigpo")
def test_gigpo_omega_zero_is_trajectory_grpo():
    b = agent_batch(REW, GRP, STEPS)
    assert torch.equal(gigpo(b, states=shared_states(), omega=0.0), grpo(b))


@pytest.mark.covers("gigpo")
@pytest.mark.parametrize("mode", ["mean_std_norm", "mean_norm"])
def test_gigpo_step_advantage_is_zero_mean_inside_each_anchor_group(mode):
    states = shared_states()
    step_r = torch.randn(6, 4, generator=torch.Generator().manual_seed(1), dtype=D)
    G = step_returns(step_r, STEPS, 0.9)
    a_s = step_advantages(G, states, torch.tensor(GRP), mode=mode)
    groups = {}
    for i, row in enumerate(states):
        for s, st in enumerate(row):
            groups.setdefault((GRP[i], st), []).append(float(a_s[i, s]))
    assert any(len(v) >= 3 for v in groups.values())
    for key, vals in groups.items():
        assert sum(vals) == pytest.approx(0.0, abs=1e-12), key
        if len(vals) == 1:
            assert vals[0] == 0.0
    # the same state in two prompt groups is two anchor groups: "goal" is reached only in group 0
    assert a_s[0, 2] == pytest.approx(-float(a_s[2, 3]))


@pytest.mark.covers("gigpo")
def test_gigpo_hand_computed_example_and_token_broadcast():
    b = agent_batch([1.0, 0.0], [0, 0], [2, 2], tokens_per_step=3)
    states = [["s0", "s1"], ["s0", "s2"]]
    gamma = 0.5
    A = gigpo(b, states=states, gamma=gamma, omega=0.7)
    # episode: (1 - 0.5)/(std([1, 0]) + eps) = +-0.5/0.7071
    a_e = 0.5 / (math.sqrt(0.5) + 1e-6)
    # sparse default: R on the last step, G = [gamma R, R]; anchor "s0": G = [0.5, 0] -> +-a_e
    expected = torch.tensor([[a_e + 0.7 * a_e] * 3 + [a_e] * 3,
                             [-a_e - 0.7 * a_e] * 3 + [-a_e] * 3], dtype=D)
    assert torch.allclose(A, expected, atol=1e-12)
    assert torch.allclose(step_returns(torch.tensor([[0.0, 1.0], [0.0, 0.0]]), [2, 2], gamma),
                          torch.tensor([[0.5, 1.0], [0.0, 0.0]], dtype=D))


@pytest.mark.covers("gigpo")
def test_gigpo_validates_inputs_and_steps_mode_weights_by_trajectory_length():
    b = agent_batch(REW, GRP, STEPS)
    with pytest.raises(ValueError, match="turn id"):
        bad = agent_batch(REW, GRP, STEPS)
        bad.turn = bad.turn.clone()
        bad.turn[0, 0] = 7
        gigpo(bad, states=shared_states())
    with pytest.raises(TypeError, match="hashable"):
        gigpo(b, states=[[["list"]] * n for n in STEPS])
    with pytest.raises(ValueError, match="needs batch fields"):
        gigpo(make_batch(REW, GRP), states=shared_states())
    with pytest.warns(UserWarning, match="without anchor"):
        assert torch.equal(gigpo(make_batch(REW, GRP)), grpo(make_batch(REW, GRP)))
    A = gigpo(b, states=shared_states(), omega=0.0, episode_stats="steps")
    R, n = torch.tensor(REW[:3], dtype=D), torch.tensor(STEPS[:3], dtype=D)
    vals = R.repeat_interleave(n.long())
    assert float(A[0, 0]) == pytest.approx(float((R[0] - vals.mean()) / (vals.std() + 1e-6)), rel=1e-12)


@pytest.mark.covers("gigpo")
@pytest.mark.parametrize("episode_stats", ["trajectory", "steps"])
def test_gigpo_allow_singletons_values_on_lone_trajectories(episode_stats):
    """Prompts 2 (one step, R = 0.7) and 3 (three steps, R = 0.9) are sampled once. "keep" (verl-agent's pool of one
    sample: mean 0, std 1): A_E = R / (1 + eps) per trajectory; per step, the one-step prompt alone is a pool of one
    and the three-step prompt a pool of 3 equal samples (A_E = 0). True: 0; False: refused."""
    rewards, groups, steps = REW + [0.7, 0.9], GRP + [2, 3], STEPS + [1, 3]
    b = agent_batch(rewards, groups, steps)
    states = shared_states() + [["u0"], ["v0", "v1", "v2"]]
    keep = gigpo(b, states=states, omega=0.0, episode_stats=episode_stats, allow_singletons="keep")
    lone_3 = 0.9 / (1 + 1e-6) if episode_stats == "trajectory" else 0.0
    assert float(keep[6, 0]) == pytest.approx(0.7 / (1 + 1e-6), rel=1e-12) and float(keep[7, 0]) == lone_3
    zeroed = gigpo(b, states=states, omega=0.0, episode_stats=episode_stats, allow_singletons=True)
    assert torch.equal(zeroed[6:], torch.zeros_like(zeroed[6:])) and torch.equal(zeroed[:6], keep[:6])
    with pytest.raises(ValueError, match=r"group of one \(rows \[6, 7\]\)"):
        gigpo(b, states=states, omega=0.0, episode_stats=episode_stats)
