"""UI-S1: step returns that reset at expert mismatches, (prompt, step) groups, the episode term, reductions."""
import pytest
import torch

from tests.helpers import D, make_batch
from workbench import registry
from workbench.advantages.group import grpo
from workbench.advantages.uis1 import match_reset_returns, step_index_advantages, uis1

pytestmark = pytest.mark.covers("ui-s1")

STEPS = [3, 2, 4, 1, 3, 3]
GRP = [0, 0, 0, 1, 1, 1]


def agent_batch(step_r, steps=STEPS, groups=GRP, tokens_per_step=2):
    rewards = [float(step_r[i, :n].sum()) for i, n in enumerate(steps)]
    b = make_batch(rewards, groups, [n * tokens_per_step for n in steps])
    T = b.mask.shape[1]
    turn = (torch.arange(T) // tokens_per_step)[None].expand(len(steps), T).clone()
    b.turn = torch.where(b.mask > 0, turn, torch.full_like(turn, -1))
    return b


def random_case(seed):
    g = torch.Generator().manual_seed(seed)
    step_r = (torch.rand(len(STEPS), max(STEPS), generator=g, dtype=D) * 4).round() / 4
    matches = [[bool(x) for x in (torch.rand(n, generator=g) < 0.7)] for n in STEPS]
    return step_r, matches


def test_registered_with_the_authors_script_defaults():
    e = registry.get("advantage", "ui-s1")
    assert {"gamma": 0.5, "episode_advantage_w": 1.0, "step_advantage_w": 1.0, "mode": "mean_std_norm",
            "eps": 1e-6}.items() <= e.defaults.items()
    assert set(e.needs) == {"multi_turn", "expert"} and e.equation and e.fn.__doc__
    rollout = registry.get("rollout", "ui-s1")
    assert rollout.defaults["patch_threshold"] == 2 and set(rollout.needs) == {"multi_turn", "expert"}
    assert e.title == rollout.title == registry.catalog()["ui-s1"]["title"] and e.confidence == "exact"


def test_gamma_zero_gives_the_step_rewards():
    """Catalog (1)."""
    step_r, matches = random_case(0)
    G = match_reset_returns(step_r, matches, 0.0)
    for i, n in enumerate(STEPS):
        assert torch.equal(G[i, :n], step_r[i, :n]) and torch.all(G[i, n:] == 0)


def test_a_mismatch_resets_the_return():
    """Catalog (2): a mismatch at step k keeps r_k only, and the steps before it see nothing from k on."""
    r = torch.tensor([[1.0, 2.0, 4.0, 8.0, 16.0]], dtype=D)
    gamma = 0.5
    all_match = match_reset_returns(r, [[True] * 5], gamma)
    assert all_match[0].tolist() == [1 + 1 + 1 + 1 + 1, 2 + 2 + 2 + 2, 4 + 4 + 4, 8 + 8, 16.0]
    G = match_reset_returns(r, [[True, True, False, True, True]], gamma)
    assert G[0].tolist() == [1 + 0.5 * 2, 2.0, 4.0, 8 + 8, 16.0]
    G2 = match_reset_returns(r, [[True, False, True, True, False]], gamma)
    assert G2[0].tolist() == [1.0, 2.0, 4 + 4, 8.0, 16.0]


def test_without_the_step_term_it_is_grpo():
    """Catalog (3): w_step = 0 -> GRPO with the episode advantage (R = the episode's return)."""
    for seed in range(3):
        step_r, matches = random_case(seed)
        b = agent_batch(step_r)
        assert torch.equal(uis1(b, matches=matches, step_rewards=step_r, step_advantage_w=0.0), grpo(b))
        assert torch.equal(uis1(b, matches=matches, step_rewards=step_r, step_advantage_w=0.0, mode="mean_norm"),
                           grpo(b, scale="none"))


@pytest.mark.parametrize("mode", ["mean_std_norm", "mean_norm"])
def test_step_advantages_are_zero_mean_per_prompt_and_step_index(mode):
    """Catalog (3): the step term sums to 0 over each (prompt, step index) group; a step index reached by one
    trajectory of its group gets 0."""
    step_r, matches = random_case(3)
    a = step_index_advantages(match_reset_returns(step_r, matches, 0.5), STEPS, torch.tensor(GRP), mode=mode)
    for g in set(GRP):
        rows = [i for i in range(len(STEPS)) if GRP[i] == g]
        for s in range(max(STEPS)):
            members = [i for i in rows if STEPS[i] > s]
            vals = [float(a[i, s]) for i in members]
            assert sum(vals) == pytest.approx(0.0, abs=1e-12)
            if len(members) == 1:
                assert vals == [0.0]
    assert float(a[2, 3]) == 0.0  # only row 2 of group 0 reaches step 3


def test_hand_computed_example_and_token_broadcast():
    """Two episodes of 2 steps: both match at step 1; row 1 mismatches at step 0 (its step-0 return is r_0 alone)."""
    step_r = torch.tensor([[1.0, 1.0], [0.0, 1.0]], dtype=D)
    b = agent_batch(step_r, steps=[2, 2], groups=[0, 0], tokens_per_step=3)
    matches = [[True, True], [False, True]]
    A = uis1(b, matches=matches, step_rewards=step_r, gamma=0.5, mode="mean_norm")
    # R = [2, 1] -> A_ep = +-0.5; G = [[1.5, 1], [0, 1]] -> step 0: +-0.75, step 1: 0
    expected = torch.tensor([[1.25] * 3 + [0.5] * 3, [-1.25] * 3 + [-0.5] * 3], dtype=D)
    assert torch.equal(A, expected)
    A_w = uis1(b, matches=matches, step_rewards=step_r, gamma=0.5, mode="mean_norm", episode_advantage_w=2.0,
               step_advantage_w=0.5)
    assert A_w[0, 0] == 2.0 * 0.5 + 0.5 * 0.75


def test_reads_matches_and_step_rewards_from_the_rollout_batch():
    step_r, matches = random_case(5)
    b = agent_batch(step_r)
    b.turn_info = [[{"state": s, "expert_match": m} for s, m in enumerate(row)] for row in matches]
    b.turn_rewards = step_r
    assert torch.equal(uis1(b), uis1(b, matches=matches, step_rewards=step_r))
    b.turn_info = [[{"state": s} for s in range(n)] for n in STEPS]
    with pytest.raises(ValueError, match="expert_match"):
        uis1(b)


def test_bad_inputs_are_clear_errors():
    step_r, matches = random_case(6)
    b = agent_batch(step_r)
    with pytest.raises(ValueError, match="mode"):
        uis1(b, matches=matches, mode="whiten")
    with pytest.raises(ValueError, match="ui-s1 rollout"):
        uis1(b)
    with pytest.raises(ValueError, match="turn id"):
        uis1(b, matches=[row[:1] for row in matches])
    with pytest.raises(ValueError, match="step_rewards must have shape"):
        uis1(b, matches=matches, step_rewards=step_r[:, :2])
