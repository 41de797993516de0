"""Dr. MAS: GRPO with one group per (prompt, agent): per-agent z-scores, the one-agent reduction to grpo, invariance to
rescaling one agent's rewards, the authors' singleton convention and vanilla mode, clear refusals."""
from __future__ import annotations

import pytest
import torch

from tests.advantages.step_batches import episode_batch
from tests.advantages.test_marft import kuhn_self_play
from tests.helpers import make_batch
from workbench import registry
from workbench.advantages.dr_mas import dr_mas
from workbench.advantages.group import grpo
from workbench.advantages.step_critic import turn_spans

pytestmark = pytest.mark.covers("dr-mas")
D = torch.float64


def two_agents(rewards0, rewards1, group=None, turns=None):
    """Single-turn rows: episode e has agent 0's row (reward rewards0[e]) and agent 1's (rewards1[e]); `turns`: per row
    the number of turns (then a multi-turn layout, reward on the last turn)."""
    E = len(rewards0)
    group = [0] * E if group is None else group
    rewards = [x for pair in zip(rewards0, rewards1) for x in pair]
    if turns is None:
        b = make_batch(rewards, [g for g in group for _ in range(2)], lengths=[2] * (2 * E))
    else:
        b = episode_batch([[2] * n for n in turns], [[0.0] * (n - 1) + [r] for n, r in zip(turns, rewards)],
                          group=torch.tensor([g for g in group for _ in range(2)]))
    b.agent = torch.tensor([0, 1] * E)
    b.episode = torch.arange(E).repeat_interleave(2)
    return b


def row_values(A):
    return A.sum(-1) / (A != 0).sum(-1).clamp(min=1)


def test_each_prompt_agent_group_has_mean_zero_and_std_one():
    b = two_agents([1.0, 0.0, 2.0, 1.0, 5.0, 4.0], [10.0, 30.0, 20.0, 0.0, 50.0, 70.0], group=[0, 0, 0, 1, 1, 1])
    a = dr_mas(b, eps=0.0)[:, 0]
    for q in (0, 1):
        for k in (0, 1):
            rows = (b.group == q) & (b.agent == k)
            assert abs(float(a[rows].mean())) < 1e-12 and abs(float(a[rows].std()) - 1.0) < 1e-12


def test_with_invocations_pooled_the_statistics_weigh_each_row_by_its_turns():
    """pool="invocations" (the authors'): over the agent's calls, each row counted once per turn, mean 0 and std 1."""
    b = two_agents([1.0, 0.0, 3.0], [4.0, 2.0, 0.0], turns=[1, 2, 3, 1, 2, 2])
    a = row_values(dr_mas(b, eps=0.0))
    n = torch.tensor([1, 2, 3, 1, 2, 2], dtype=D)
    for k in (0, 1):
        rows = b.agent == k
        calls = a[rows].repeat_interleave(n[rows].long())
        assert abs(float(calls.mean())) < 1e-12 and abs(float(calls.std()) - 1.0) < 1e-12
    rows_mode = dr_mas(b, eps=0.0, pool="rows")
    assert not torch.allclose(rows_mode, dr_mas(b, eps=0.0))  # the weighting matters here


@pytest.mark.parametrize("pool", ["rows", "invocations"])
def test_one_agent_is_grpo_exactly(pool):
    rewards, group = [1.0, 0.0, 0.5, 2.0, -1.0, 0.25], [0, 0, 0, 1, 1, 1]
    b = make_batch(rewards, group, lengths=[2, 3, 1, 4, 2, 3])
    b.agent = torch.zeros(6, dtype=torch.long)
    assert torch.equal(dr_mas(b, pool=pool, allow_singletons=False), grpo(b))
    assert torch.equal(dr_mas(b, pool=pool, norm_by_std=False), grpo(b, scale="none", allow_singletons="keep"))


def test_one_agent_with_multi_turn_rows_is_grpo_with_pool_rows():
    b = episode_batch([[2], [2, 2], [1, 1, 1], [3]], [[1.0], [0.0, 0.5], [0.0, 0.0, 2.0], [0.25]])
    b.agent = torch.zeros(4, dtype=torch.long)
    assert torch.equal(dr_mas(b, pool="rows"), grpo(b, allow_singletons="keep"))


@pytest.mark.parametrize("c", [0.1, 3.0, 100.0])
def test_rescaling_one_agents_rewards_leaves_its_advantages_unchanged_and_global_grpo_changes(c):
    r0, r1 = [1.0, 0.0, 2.0, 1.0], [3.0, 1.0, 0.0, 5.0]
    b, scaled = two_agents(r0, r1), two_agents(r0, [c * x for x in r1])
    a, a_scaled = dr_mas(b, eps=0.0), dr_mas(scaled, eps=0.0)
    torch.testing.assert_close(a, a_scaled, rtol=1e-12, atol=1e-12)  # both agents: each group is scale-free
    g, g_scaled = grpo(b), grpo(scaled)
    agent0 = b.agent == 0
    assert not torch.allclose(g[agent0], g_scaled[agent0])  # one global baseline moves with agent 1's scale


def test_singletons_keep_the_raw_reward_by_default_as_the_authors():
    b = two_agents([1.0, 0.0], [4.0, 2.0])
    b = b.select(torch.tensor([0, 1, 2]))  # agent 1 acted in episode 0 only: a group of one
    a = row_values(dr_mas(b))
    assert float(a[1]) == pytest.approx(4.0 / (1 + 1e-6), rel=1e-12)
    assert float(row_values(dr_mas(b, allow_singletons=True))[1]) == 0.0
    with pytest.raises(ValueError, match="dr-mas: a group of one"):
        dr_mas(b, allow_singletons=False)


def test_vanilla_mode_gives_each_episode_one_advantage_and_zero_for_zero_sum_games():
    coop = two_agents([1.0, 0.0, 1.0], [1.0, 0.0, 1.0])
    a = row_values(dr_mas(coop, group_by_agent=False))
    assert torch.equal(a[0::2], a[1::2])  # the agents of one episode share it
    episodes = make_batch([1.0, 0.0, 1.0], [0, 0, 0], lengths=[1, 1, 1])
    torch.testing.assert_close(a[0::2], grpo(episodes)[:, 0])
    zero_sum = two_agents([1.0, -1.0, 1.0], [-1.0, 1.0, -1.0])
    assert bool((dr_mas(zero_sum, group_by_agent=False) == 0).all())


def test_on_kuhn_self_play_rows_each_prompt_agent_pools_its_calls_to_mean_zero():
    b = kuhn_self_play()
    A = dr_mas(b, eps=0.0)
    calls = turn_spans(b)[2].sum(-1)
    value = A.gather(1, turn_spans(b)[0][:, :1])[:, 0].double()
    checked = 0
    for q in b.group.unique():
        for k in (0, 1):
            rows = (b.group == q) & (b.agent == k)
            pooled = value[rows].repeat_interleave(calls[rows])
            if bool((b.rewards[rows] != b.rewards[rows][0]).any()):
                assert abs(float(pooled.mean())) < 1e-5 and float(pooled.std()) == pytest.approx(1.0, abs=1e-5)
                checked += 1
    assert checked >= 4
    assert A.dtype == b.mask.dtype


def test_a_batch_without_agents_is_refused_with_the_fix():
    with pytest.raises(ValueError, match=r"dr-mas groups by \(prompt, agent\): the batch has no agent ids; use the "
                                         r"multi-agent rollout `agents`"):
        dr_mas(make_batch([1.0, 0.0], [0, 0]))


def test_bad_settings_are_refused_and_the_registration_is_the_catalogs():
    b = two_agents([1.0, 0.0], [1.0, 0.0])
    with pytest.raises(ValueError, match="pool must be one of"):
        dr_mas(b, pool="calls")
    with pytest.raises(ValueError, match="norm_by_std must be True or False"):
        dr_mas(b, norm_by_std=1)
    entry = registry.get("advantage", "dr-mas")
    assert entry.family == "multiagent" and entry.defaults["allow_singletons"] == "keep"
    assert "agents" in entry.needs and entry.equation and entry.fn.__doc__
