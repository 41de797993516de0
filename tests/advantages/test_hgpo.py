"""HGPO: nested history groups, (k+1)^alpha weights over the non-zero levels, K = 0 = GiGPO's step advantage."""
import math

import pytest
import torch

from tests.helpers import D, make_batch
from workbench import registry
from workbench.advantages.gigpo import gigpo, step_advantages, step_returns
from workbench.advantages.group import grpo
from workbench.advantages.hgpo import hgpo, hgpo_step_advantages, level_advantages, weighted_levels

pytestmark = pytest.mark.covers("hgpo")


def agent_batch(rewards, groups, steps, tokens_per_step=2):
    """Rows of len(steps[i]) steps with `tokens_per_step` policy tokens each, right-padded; turn ids per token."""
    b = make_batch(rewards, groups, [n * tokens_per_step for n in steps])
    T = b.mask.shape[1]
    turn = (torch.arange(T) // tokens_per_step)[None].expand(len(rewards), T).clone()
    b.turn = torch.where(b.mask > 0, turn, torch.full_like(turn, -1))
    return b


REW = [1.0, 0.0, 1.0, 0.0, 0.5, 0.25]
GRP = [0, 0, 0, 1, 1, 1]
STEPS = [3, 3, 4, 1, 3, 2]
STATES = [["s0", "a", "g"], ["s0", "a", "g"], ["s0", "b", "a", "g"], ["t0"], ["t0", "x", "y"], ["t0", "x"]]


def random_rewards(seed, B=6, S=4):
    return torch.randn(B, S, generator=torch.Generator().manual_seed(seed), dtype=D)


def test_registered_with_the_authors_defaults():
    e = registry.get("advantage", "hgpo")
    assert {"history_length": 2, "length_weight_alpha": 1.0, "gamma": 0.95, "mode": "mean_std_norm",
            "base_group": False, "eps": 1e-6, "unbiased": False}.items() <= e.defaults.items()
    assert e.confidence == "exact" and e.equation and "multi_turn" in e.needs and e.fn.__doc__
    assert e.title == registry.catalog()["hgpo"]["title"]


@pytest.mark.parametrize("mode", ["mean_std_norm", "mean_norm"])
def test_history_zero_without_base_group_is_the_gigpo_step_advantage(mode):
    """Catalog (1): K = 0, no base group: only current-state groups, one level, weight 1 -> GiGPO's A_S (with its
    Bessel std; HGPO's default population std differs only in mean_std_norm)."""
    b = agent_batch(REW, GRP, STEPS)
    step_r = random_rewards(0)
    G = step_returns(step_r, STEPS, 0.9)
    gigpo_step = step_advantages(G, STATES, b.group, mode=mode)
    ours = hgpo_step_advantages(G, STATES, b.group, history_length=0, mode=mode, unbiased=True)
    assert torch.equal(ours, gigpo_step)
    # through the batch: gigpo(omega=1) - gigpo(omega=0) is omega * A_S on every policy token
    A_S = gigpo(b, states=STATES, step_rewards=step_r, gamma=0.9, mode=mode) \
        - gigpo(b, states=STATES, step_rewards=step_r, gamma=0.9, mode=mode, omega=0.0)
    A = hgpo(b, states=STATES, step_rewards=step_r, gamma=0.9, mode=mode, history_length=0, unbiased=True)
    torch.testing.assert_close(A, A_S, rtol=0, atol=1e-14)
    if mode == "mean_norm":  # no std: the std convention does not matter
        assert torch.equal(hgpo_step_advantages(G, STATES, b.group, history_length=0, mode=mode), gigpo_step)


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("mode", ["mean_std_norm", "mean_norm"])
def test_every_level_is_zero_mean_inside_each_group_and_singletons_get_zero(k, mode):
    """Catalog (2): a_k sums to 0 over each history group; a group of one step gives 0."""
    G = step_returns(random_rewards(1), STEPS, 0.8)
    a = level_advantages(G, STATES, torch.tensor(GRP), k, mode=mode)
    groups = {}
    for i, row in enumerate(STATES):
        for s in range(len(row)):
            if s + 1 >= k:
                groups.setdefault((GRP[i], tuple(row[s - k + 1:s + 1])), []).append(float(a[i, s]))
            else:
                assert a[i, s] == 0  # fewer than k observations: not in any depth-k group
    assert any(len(v) >= 2 for v in groups.values())
    for key, vals in groups.items():
        assert sum(vals) == pytest.approx(0.0, abs=1e-12), key
        if len(vals) == 1:
            assert vals[0] == 0.0


def test_a_step_whose_groups_are_all_singletons_gets_zero_unless_the_base_group_is_on():
    """Catalog (3). Row 2 step 1 ("b") and the group-1 steps after "t0" are in no shared group at any depth."""
    b = agent_batch(REW, GRP, STEPS)
    step_r = random_rewards(2)
    A = hgpo(b, states=STATES, step_rewards=step_r, gamma=0.9)
    assert torch.all(A[2, 2:4] == 0)   # row 2, step 1: state "b" only there
    base = hgpo(b, states=STATES, step_rewards=step_r, gamma=0.9, base_group=True)
    a_e = grpo(b)  # the base group alone: weight 1, the only non-zero level
    torch.testing.assert_close(base[2, 2:4], a_e[2, 2:4], rtol=0, atol=1e-14)


def test_hand_computed_levels_weights_and_broadcast():
    """Two trajectories s0 -> a -> g and s0 -> a: step 1 is in the same k = 1 ("a") and k = 2 ("s0", "a") groups.
    gamma = 0.5, reward 1 at the end of row 0 only."""
    b = agent_batch([1.0, 0.0], [0, 0], [3, 2], tokens_per_step=1)
    states = [["s0", "a", "g"], ["s0", "a"]]
    step_r = torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 0.0]], dtype=D)
    # G row 0 = [0.25, 0.5, 1], row 1 = [0, 0]; pairs (0.25, 0) at step 0, (0.5, 0) at step 1; population std = d/2
    a0 = 0.125 / (0.125 + 1e-6)
    a1 = 0.25 / (0.25 + 1e-6)
    A = hgpo(b, states=states, step_rewards=step_r, gamma=0.5, history_length=2)
    # step 0: level 1 only; step 1: levels 1 and 2 equal (same members) -> (2 a + 3 a) / 5 = a; step 2: singleton
    expected = torch.tensor([[a0, a1, 0.0], [-a0, -a1, 0.0]], dtype=D)
    torch.testing.assert_close(A, expected, rtol=0, atol=1e-14)
    # Bessel std: d / sqrt(2)
    A_b = hgpo(b, states=states, step_rewards=step_r, gamma=0.5, unbiased=True)
    assert float(A_b[0, 0]) == pytest.approx(0.125 / (0.25 / math.sqrt(2) + 1e-6), rel=1e-12)


def test_weights_are_k_plus_one_to_the_alpha_over_non_zero_levels():
    levels = torch.tensor([[[1.0, 0.0, 2.0]], [[3.0, 0.0, 0.0]], [[-1.0, 4.0, 0.0]]], dtype=D)  # [L=3, B=1, S=3]
    depths = [1, 2, 3]
    out = weighted_levels(levels, depths, alpha=1.0)
    assert out.tolist() == [[pytest.approx((2 * 1 + 3 * 3 + 4 * -1) / 9), 4.0, 2.0]]
    uniform = weighted_levels(levels, depths, alpha=0.0)
    assert uniform[0, 0] == pytest.approx(1.0) and uniform[0, 1] == 4.0
    with_base = weighted_levels(torch.cat([torch.full((1, 1, 3), 0.5, dtype=D), levels]), [0, *depths], 2.0)
    assert with_base[0, 1] == pytest.approx((1 * 0.5 + 16 * 4.0) / 17)
    assert weighted_levels(torch.zeros(2, 1, 2, dtype=D), [1, 2], 1.0).tolist() == [[0.0, 0.0]]
    # the authors' normalization: w / (sum w + eps) shrinks even a single level
    assert weighted_levels(levels, depths, 1.0, weight_eps=1e-6)[0, 2] == pytest.approx(2.0 * 2 / (2 + 1e-6))


def test_same_state_after_different_histories_splits_at_depth_two():
    """Steps at "a" after "s0" and after "b": one depth-1 group, two depth-2 groups."""
    states = [["s0", "a"], ["s0", "a"], ["b", "a"], ["b", "a"]]
    G = torch.tensor([[0.0, 1.0], [0.0, 0.0], [0.0, 3.0], [0.0, 2.0]], dtype=D)
    group = torch.zeros(4, dtype=torch.long)
    a1 = level_advantages(G, states, group, 1, mode="mean_norm")
    a2 = level_advantages(G, states, group, 2, mode="mean_norm")
    assert a1[:, 1].tolist() == [-0.5, -1.5, 1.5, 0.5]       # mean 1.5 over all four
    assert a2[:, 1].tolist() == [0.5, -0.5, 0.5, -0.5]       # mean within each history
    A = hgpo_step_advantages(G, states, group, history_length=1, mode="mean_norm")
    assert A[:, 1].tolist() == pytest.approx([(2 * -0.5 + 3 * 0.5) / 5, (2 * -1.5 + 3 * -0.5) / 5,
                                              (2 * 1.5 + 3 * 0.5) / 5, (2 * 0.5 + 3 * -0.5) / 5])


def test_reads_observations_and_step_rewards_from_the_rollout_batch():
    b = agent_batch(REW, GRP, STEPS)
    step_r = random_rewards(3)
    b.turn_info = [[{"state": s} for s in row] for row in STATES]
    b.turn_rewards = step_r
    assert torch.equal(hgpo(b), hgpo(b, states=STATES, step_rewards=step_r))
    with pytest.raises(ValueError, match="observation"):
        hgpo(agent_batch(REW, GRP, STEPS))


def test_bad_inputs_are_clear_errors():
    b = agent_batch(REW, GRP, STEPS)
    with pytest.raises(ValueError, match="history_length"):
        hgpo(b, states=STATES, history_length=-1)
    with pytest.raises(ValueError, match="mode"):
        hgpo(b, states=STATES, mode="whiten")
    with pytest.raises(TypeError, match="hashable"):
        hgpo(b, states=[[["x"]] * n for n in STEPS])
    with pytest.raises(ValueError, match="turn id"):
        hgpo(b, states=[row[:1] for row in STATES])
    with pytest.raises(ValueError, match="rows but the batch"):
        hgpo(b, states=STATES[:2])
