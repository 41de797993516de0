"""VL-DAC: one critic value per environment step, step GAE, every token of an action shares its step's advantage."""
import pytest
import torch

from tests.advantages.step_batches import D, episode_batch, layout, returns_to_go
from workbench import registry
from workbench.advantages.step_critic import step_gae, turn_spans
from workbench.advantages.vl_dac import vl_dac, vl_dac_steps, vl_dac_targets

pytestmark = pytest.mark.covers("vl-dac")

ACTIONS = [[3, 1, 2], [2, 2], [1, 4, 1, 2]]
REWARDS = [[0.0, 0.5, 1.0], [0.0, -1.0], [0.25, 0.0, 0.0, 2.0]]


def test_registered_with_the_authors_defaults_and_needs():
    e = registry.get("advantage", "vl-dac")
    assert e.defaults == {"gamma": 0.99, "lam": 0.95, "whiten": True, "eps": 1e-8}
    assert e.needs == ("multi_turn",) and "values" in e.reads and e.targets is vl_dac_targets
    assert e.confidence == "exact" and e.equation


def test_gamma_lambda_one_and_zero_values_give_the_return_to_go_of_each_step():
    b = episode_batch(ACTIONS, REWARDS)
    b.values = b.old_values = torch.zeros_like(b.mask)
    A = vl_dac(b, gamma=1.0, lam=1.0, whiten=False)
    first, _, _valid = turn_spans(b)
    for i, G in enumerate(returns_to_go(REWARDS)):
        assert A[i].gather(0, first[i, :len(G)]).tolist() == pytest.approx(G)


def test_every_token_of_an_action_shares_one_advantage_and_observations_get_none():
    b = episode_batch(ACTIONS, REWARDS)
    A = vl_dac(b)
    for i, lengths in enumerate(ACTIONS):
        for s in range(len(lengths)):
            tokens = A[i][(b.turn[i] == s) & (b.mask[i] > 0)]
            assert len(tokens) == lengths[s] and bool((tokens == tokens[0]).all())
    assert bool((A[b.mask == 0] == 0).all())


def test_one_value_target_per_environment_step_at_its_first_token():
    b = episode_batch(ACTIONS, REWARDS)
    returns, vmask = vl_dac_targets(b)
    _, _, first, _ = layout(ACTIONS)
    assert int(vmask.sum()) == sum(len(a) for a in ACTIONS) == 9
    for i, lengths in enumerate(ACTIONS):
        assert torch.nonzero(vmask[i]).flatten().tolist() == first[i, :len(lengths)].tolist()
    adv, R, firsts, valid = vl_dac_steps(b, 0.99, 0.95)
    V = b.values.gather(1, firsts) * valid
    assert torch.allclose(R, (adv + V) * valid)
    assert torch.allclose(returns[vmask > 0], R[valid])


def test_hand_computed_step_gae_reads_the_value_at_each_turns_first_token():
    b = episode_batch([[2, 3]], [[0.0, 1.0]])
    b.values = torch.tensor([[0.5, 9.0, 7.0, 7.0, 0.2, 9.0, 9.0]], dtype=D) * b.mask   # other tokens are ignored
    A = vl_dac(b, gamma=0.9, lam=0.5, whiten=False)
    a1 = 1.0 - 0.2
    a0 = 0.0 + 0.9 * 0.2 - 0.5 + 0.9 * 0.5 * a1
    assert A[0].tolist() == pytest.approx([a0, a0, 0, 0, a1, a1, a1])


def test_whitening_counts_each_step_once_not_each_token():
    b = episode_batch(ACTIONS, REWARDS)
    raw, _, first, valid = vl_dac_steps(b, 0.99, 0.95)
    A = vl_dac(b)
    steps = A.gather(1, first)[valid]
    assert float(steps.mean()) == pytest.approx(0.0, abs=1e-12)
    assert float(steps.std()) == pytest.approx(1.0, abs=1e-6)
    expected = (raw[valid] - raw[valid].mean()) / (raw[valid].std() + 1e-8)
    assert torch.allclose(steps, expected)


def test_step_gae_does_not_read_values_past_a_rows_last_step():
    b = episode_batch([[1, 1], [1, 1, 1]], [[0.0, 1.0], [0.0, 0.0, 1.0]])
    adv, _, _, valid = vl_dac_steps(b, 0.9, 0.9)
    V = b.values.gather(1, turn_spans(b)[0]) * valid
    last = adv[0, 1]
    assert float(last) == pytest.approx(1.0 - float(V[0, 1]))
    ref, _ = step_gae(torch.tensor([[0.0, 1.0]], dtype=D), V[:1, :2], valid[:1, :2], 0.9, 0.9)
    assert torch.allclose(adv[0, :2], ref[0])
