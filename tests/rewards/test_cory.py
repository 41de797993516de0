"""CORY's collective reward (reward shaping `cory`): every row of an episode is paid r_P + w * (the observers' rewards),
w = 0 leaves the pioneer's own reward, turn rewards follow, metrics per role, clear refusals."""
import pytest
import torch

from tests.helpers import make_batch, step_context
from workbench import registry
from workbench.rewards.cory import collective_rewards, cory_rewards

pytestmark = pytest.mark.covers("cory")

# three episodes of (pioneer, observer) rows; the pioneer is agent 0
REWARDS = [1.0, 0.0, 0.0, 1.0, -1.0, 1.0]
AGENT = [0, 1, 0, 1, 0, 1]
EPISODE = [0, 0, 1, 1, 2, 2]


def batch_of(rewards=REWARDS, agent=AGENT, episode=EPISODE, policy=None, **fields):
    return make_batch(rewards, [0] * len(rewards), agent=torch.tensor(agent), episode=torch.tensor(episode),
                      policy=None if policy is None else torch.tensor(policy), **fields)


def shaped(batch, **kw):
    ctx = step_context()
    return cory_rewards(batch, ctx, **kw), ctx.metrics


def test_every_row_of_an_episode_is_paid_the_pair_s_total():
    out, metrics = shaped(batch_of(policy=[1, 0] * 3))
    assert out.rewards.tolist() == [1.0, 1.0, 1.0, 1.0, 0.0, 0.0]
    assert metrics == pytest.approx({"cory/reward_pioneer": 0.0, "cory/reward_observer": 2 / 3,
                                     "cory/collective": 2 / 3, "cory/pioneer_policy": 1.0})
    assert set(metrics) == {m.name for m in registry.get("reward_shaping", "cory").logs}


def test_zero_observer_weight_pays_the_pioneer_s_own_reward_to_both_rows():
    out, metrics = shaped(batch_of(), observer_weight=0.0)
    assert out.rewards.tolist() == [1.0, 1.0, 0.0, 0.0, -1.0, -1.0]
    pioneer = torch.tensor(AGENT) == 0
    assert torch.equal(out.rewards[pioneer], torch.tensor(REWARDS, dtype=out.rewards.dtype)[pioneer])
    assert metrics["cory/collective"] == pytest.approx(0.0)


def test_observer_weight_scales_every_observer_and_any_number_of_agents():
    rewards, agent, episode = [1.0, 0.5, 0.25, 2.0, 0.0, 1.0], [0, 1, 2, 2, 1, 0], [0, 0, 0, 1, 1, 1]
    out, _ = shaped(batch_of(rewards, agent, episode), observer_weight=0.5)
    assert out.rewards.tolist() == [1.375] * 3 + [2.0] * 3  # 1 + (0.5 + 0.25) / 2 and 1 + (2 + 0) / 2
    out, _ = shaped(batch_of(rewards, agent, episode), pioneer=2)
    assert out.rewards.tolist() == [1.75] * 3 + [3.0] * 3  # a sum is a sum whoever is the pioneer at w = 1


def test_an_episode_without_its_pioneer_row_and_a_pioneer_only_batch():
    out, metrics = shaped(batch_of([0.5, 1.0, 1.0], [1, 0, 0], [4, 7, 9]), observer_weight=2.0)
    assert out.rewards.tolist() == [1.0, 1.0, 1.0]  # episode 4: only its observer (2 * 0.5); 7 and 9: pioneers alone
    only_pioneers, _ = shaped(batch_of([1.0, 0.0], [0, 0], [0, 1]), observer_weight=0.0)
    assert only_pioneers.rewards.tolist() == [1.0, 0.0]  # the control cory-ppo's batch: R = r_P


def test_permuting_rows_permutes_the_rewards():
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    R, totals, dense = collective_rewards(torch.tensor(REWARDS), torch.tensor(AGENT), torch.tensor(EPISODE))
    R_perm, _, _ = collective_rewards(torch.tensor(REWARDS)[perm], torch.tensor(AGENT)[perm],
                                      torch.tensor(EPISODE)[perm])
    assert torch.equal(R_perm, R[perm]) and totals.tolist() == [1.0, 1.0, 0.0] and dense.tolist() == EPISODE


def test_turn_rewards_follow_on_each_row_s_last_step():
    turn = torch.tensor([[0, 1, 1], [0, -1, -1], [0, 1, 2], [0, 0, -1]])  # [B, T] step ids, -1 padding
    turn_rewards = torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [0.5, 0.0, 0.0], [1.0, 0.0, 0.0]])
    batch = batch_of([1.0, 0.0, 0.5, 1.0], [0, 1, 0, 1], [0, 0, 1, 1], turn=turn, turn_rewards=turn_rewards)
    out, _ = shaped(batch)
    assert out.rewards.tolist() == [1.0, 1.0, 1.5, 1.5]
    assert out.turn_rewards.tolist() == [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.5, 0.0, 1.0], [1.5, 0.0, 0.0]]
    assert torch.allclose(out.turn_rewards.sum(-1), out.rewards.to(out.turn_rewards.dtype))
    assert batch.turn_rewards.tolist() == turn_rewards.tolist()  # the input is left as it was


@pytest.mark.parametrize("kw, message", [
    ({"observer_weight": -1.0}, r"observer_weight=-1.0: the observers' share .* >= 0"),
    ({"observer_weight": float("nan")}, "observer_weight=nan"),
    ({"observer_weight": True}, "observer_weight=True"),
    ({"pioneer": -1}, r"pioneer=-1: the pioneer is an agent id >= 0"),
])
def test_bad_settings_are_refused_naming_them(kw, message):
    with pytest.raises(ValueError, match=message):
        shaped(batch_of(), **kw)


def test_a_batch_without_agents_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="no agent / episode ids; use the multi-agent rollout `agents`"):
        shaped(make_batch(REWARDS, [0] * 6))
    entry = registry.get("reward_shaping", "cory")
    assert entry.needs == ("agents",) and entry.family == "multiagent" and entry.confidence == "partial"
    assert entry.defaults == {"observer_weight": 1.0, "pioneer": 0}
