"""HiPER: planner advantage per subgoal window, executor GAE bootstrapped with V^hi at the window's end."""
import pytest
import torch

from tests.advantages.step_batches import episode_batch
from workbench import registry
from workbench.advantages.hiper import hiper, hiper_steps, hiper_targets, subgoal_windows, window_edges, window_segments
from workbench.advantages.step_critic import turn_spans
from workbench.advantages.vl_dac import vl_dac_steps
from workbench.rollout.turns import Episode

pytestmark = pytest.mark.covers("hiper")

ACTIONS = [[2, 1, 3, 1, 2], [1, 2, 2, 1]]
REWARDS = [[0.0, 0.5, 0.0, 0.0, 1.0], [0.25, 0.0, -0.5, 1.0]]


def with_subgoals(subgoals, actions=ACTIONS, rewards=REWARDS, seed=0):
    """A batch whose turn_info[i][s]["subgoal"] is the subgoal reported after step s."""
    infos = [[{"state": s, "subgoal": g, "tool_error": None} for s, g in enumerate(row)] for row in subgoals]
    return episode_batch(actions, rewards, infos=infos, seed=seed)


def step_V(b):
    first, _, valid = turn_spans(b)
    return b.values.gather(1, first) * valid


def test_registered_abstract_only_with_multi_turn_and_subgoal_needs_and_critic_targets():
    e = registry.get("advantage", "hiper")
    assert e.confidence == "abstract-only" and e.needs == ("multi_turn", "subgoals") and e.targets is hiper_targets
    assert {"values", "turn_info"} <= set(e.reads) and e.defaults["gamma"] == 0.95 and e.defaults["lam"] == 0.95


def test_windows_end_at_the_step_that_changes_the_subgoal():
    b = with_subgoals([[0, 1, 1, 2, 2], [0, 0, 0, 0]])
    windows = subgoal_windows(b, 5)
    # row 0: step 0 acted under 0 and left 0; step 1 changed it to 1 (closes window 0); step 3 changed it to 2
    assert windows.tolist() == [[0, 0, 1, 1, 2], [0, 0, 0, 0, -1]]
    starts, ends = window_edges(windows, turn_spans(b)[2])
    assert starts[0].tolist() == [True, False, True, False, True]
    assert ends[0].tolist() == [False, True, False, True, True] and ends[1].tolist() == [False, False, False, True,
                                                                                        False]
    seg = window_segments(windows, b)
    assert bool((seg[b.mask == 0] == -1).all()) and torch.equal(seg[0][b.mask[0] > 0],
                                                               torch.tensor([0, 0, 0, 1, 1, 1, 1, 2, 2]))


def test_windows_follow_what_the_rollout_records_for_keydoor():
    """Episode.record keeps the state's "state" but lets the step's info override the rest: "subgoal" is the value
    after the step. Picking the key at step 0 closes window 0 there."""
    ep = Episode()
    state = {"state": 100, "subgoal": 0, "tool_error": None}
    for action, after in [("K", {"state": 100, "subgoal": 1, "tool_error": None}),
                          ("R", {"state": 101, "subgoal": 1, "tool_error": None}),
                          ("O", {"state": 101, "subgoal": 1, "tool_error": None})]:
        ep.act([1], action)
        ep.record(0.0, state, after)
        state = after
    b = with_subgoals([[info["subgoal"] for info in ep.info]], actions=[[1, 1, 1]], rewards=[[0.0, 0.0, 1.0]])
    assert [info["state"] for info in ep.info] == [100, 100, 101]
    assert subgoal_windows(b, 3).tolist() == [[0, 1, 1]]


@pytest.mark.parametrize("lam", [0.95, 0.5, 1.0])
def test_one_window_per_episode_is_flat_step_gae_and_at_lambda_one_exactly(lam):
    b = with_subgoals([[0] * 5, [0] * 4])
    ours, _, _first, _valid = hiper_steps(b, 0.9, lam, 0)
    flat, _, _, _ = vl_dac_steps(b, 0.9, lam)
    assert torch.allclose(ours[:, 1:], flat[:, 1:])
    mc, _, _, _ = vl_dac_steps(b, 0.9, 1.0)  # the first step: the planner's Monte Carlo advantage
    assert torch.allclose(ours[:, 0], mc[:, 0])
    if lam == 1.0:
        assert torch.allclose(ours, flat)
        assert torch.allclose(hiper(b, gamma=0.9, lam=1.0), registry.get("advantage", "vl-dac").fn(b, gamma=0.9,
                                                                                                   lam=1.0))


def test_planner_advantage_is_the_windows_discounted_return_plus_bootstrap_minus_baseline():
    b = with_subgoals([[0, 1, 1, 2, 2], [0, 0, 0, 0]])
    A, R, _, _ = hiper_steps(b, 0.9, 0.7, 0)
    V = step_V(b)
    r = REWARDS[0]
    # window 1 = steps 2, 3 (starts after step 1 changed the subgoal), then window 2 = step 4
    plan = r[2] + 0.9 * r[3] + 0.9 ** 2 * float(V[0, 4]) - float(V[0, 2])
    assert float(A[0, 2]) == pytest.approx(plan)
    # window 0 = steps 0, 1; window 2 = step 4, the episode's end: no bootstrap
    assert float(A[0, 0]) == pytest.approx(r[0] + 0.9 * r[1] + 0.81 * float(V[0, 2]) - float(V[0, 0]))
    assert float(A[0, 4]) == pytest.approx(r[4] - float(V[0, 4]))
    # executor step 3, the window's last: one TD error bootstrapped with V^hi of the next window's first step
    assert float(A[0, 3]) == pytest.approx(r[3] + 0.9 * float(V[0, 4]) - float(V[0, 3]))
    # executor step 1 (last of window 0) likewise; returns are A + V
    assert float(A[0, 1]) == pytest.approx(r[1] + 0.9 * float(V[0, 2]) - float(V[0, 1]))
    assert torch.allclose(R, (A + V) * turn_spans(b)[2])


def test_executor_advantages_see_later_windows_only_through_the_bootstrap():
    subgoals = [[0, 1, 1, 1, 1], [1, 1, 1, 1]]  # window 0: steps 0-1 of row 0, step 0 of row 1
    base = with_subgoals(subgoals)
    later = with_subgoals(subgoals, rewards=[[0.0, 0.5, 5.0, -3.0, 9.0], [0.25, 3.0, 7.0, 1.0]])
    a0, _, _, _ = hiper_steps(base, 0.9, 0.95, 0)
    a1, _, _, _ = hiper_steps(later, 0.9, 0.95, 0)
    assert torch.allclose(a0[0, :2], a1[0, :2]) and torch.allclose(a0[1, :1], a1[1, :1])  # window 0: unchanged
    assert not torch.allclose(a0[0, 2:], a1[0, 2:])
    moved = with_subgoals(subgoals)
    first, _, _ = turn_spans(moved)
    moved.values[0, first[0, 2]] += 1.0       # V^hi of window 1's first step: the bootstrap moves window 0
    a2, _, _, _ = hiper_steps(moved, 0.9, 0.95, 0)
    assert float(a2[0, 1] - a0[0, 1]) == pytest.approx(0.9)


def test_critic_targets_one_per_step_and_tokens_share_their_steps_advantage():
    b = with_subgoals([[0, 1, 1, 2, 2], [0, 0, 0, 0]])
    returns, vmask = hiper_targets(b)
    first, _, valid = turn_spans(b)
    _, R, _, _ = hiper_steps(b, 0.95, 0.95, 0)
    assert int(vmask.sum()) == 9 and torch.allclose(returns.gather(1, first)[valid], R[valid])
    A = hiper(b)
    for i, lengths in enumerate(ACTIONS):
        for s in range(len(lengths)):
            tok = A[i][(b.turn[i] == s) & (b.mask[i] > 0)]
            assert bool((tok == tok[0]).all())
    assert float(A.gather(1, first)[valid].mean()) == pytest.approx(0.0, abs=1e-12)


def test_a_batch_without_subgoals_is_refused_naming_the_tasks_that_report_them():
    b = episode_batch(ACTIONS, REWARDS)  # turn_info without "subgoal"
    with pytest.raises(ValueError, match=r"report no 'subgoal'.*keydoor, screen"):
        hiper(b)
    b.turn_info = []
    with pytest.raises(ValueError, match="no turn_info.*keydoor, screen"):
        hiper(b)
