"""SPA-RL: progress readings c_t at turn ends + grounding 0.5 as step rewards, step-level GAE with the critic read
at turn starts; the reference_bug weighting."""
import pytest
import torch

from tests.advantages.step_batches import D, episode_batch
from workbench import registry
from workbench.advantages.spa_rl import (grounding, progress_readings, spa_rl, spa_rl_steps, spa_rl_targets,
                                         spa_step_rewards)
from workbench.advantages.step_critic import turn_spans

pytestmark = pytest.mark.covers("spa-rl")

ACTIONS = [[2, 3, 2], [3, 2], [2, 2, 4, 2]]
ERRORS = [[None, "bad call", None], [None, None], ["x", None, "y", None]]


def spa_batch(actions=ACTIONS, errors=ERRORS, seed=0):
    infos = [[{"state": s, "tool_error": e} for s, e in enumerate(row)] for row in errors]
    return episode_batch(actions, [[0.0] * (len(a) - 1) + [float(i % 2)] for i, a in enumerate(actions)],
                         infos=infos, seed=seed)


def test_registered_with_trl_ppo_defaults_the_codes_grounding_and_needs():
    e = registry.get("advantage", "spa-rl")
    assert e.defaults == {"gamma": 1.0, "lam": 0.95, "grounding_bonus": 0.5, "whiten": True, "eps": 1e-8,
                          "reference_bug": False}
    assert e.needs == ("multi_turn",) and {"values", "turn_info"} <= set(e.reads) and e.targets is spa_rl_targets
    assert registry.get("value", "spa-rl").defaults["coef"] == 0.1


def test_progress_readings_are_the_values_at_each_turns_last_policy_token():
    b = spa_batch()
    c = progress_readings(b.values, b)
    _, _last, valid = turn_spans(b)
    for i, lengths in enumerate(ACTIONS):
        for s in range(len(lengths)):
            tokens = b.values[i][(b.turn[i] == s) & (b.mask[i] > 0)]
            assert float(c[i, s]) == float(tokens[-1])
    assert bool((c[~valid] == 0).all())


def test_grounding_adds_exactly_half_per_executed_step_and_always_on_the_last():
    b = spa_batch()
    _, _, valid = turn_spans(b)
    g = grounding(b, valid)
    assert g.tolist() == [[0.5, 0.0, 0.5, 0.0], [0.5, 0.5, 0.0, 0.0], [0.0, 0.5, 0.0, 0.5]]
    c = torch.randn(3, 4, generator=torch.Generator().manual_seed(1), dtype=D) * valid
    r = spa_step_rewards(c, g, valid)
    assert torch.allclose(r - c, g)


def test_with_no_grounding_the_undiscounted_return_is_the_estimators_prediction():
    b = spa_batch()
    b.values = b.values.clone()
    first, _, _ = turn_spans(b)
    A, R, _, _valid, critic = spa_rl_steps(b, 1.0, 1.0, 0.0, False)
    c = progress_readings(b.values, b)
    V = b.values.gather(1, first) * critic
    # gamma = lam = 1: A_0 + V_0 = the undiscounted return from step 0 = sum_t c_t
    assert torch.allclose(R[:, 0], c.sum(-1)) and torch.allclose(A[:, 0] + V[:, 0], c.sum(-1))


def test_reference_bug_weights_each_step_by_its_distance_from_the_end():
    c = torch.tensor([[1.0, 2.0, 3.0, 0.0], [1.0, 1.0, 0.0, 0.0]], dtype=D)
    g = torch.full_like(c, 0.5)
    valid = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]], dtype=torch.bool)
    assert spa_step_rewards(c, g, valid, reference_bug=True).tolist() == [[3.0, 2.5, 0.0, 0.0], [1.5, 0.0, 0, 0]]
    assert spa_step_rewards(c, g, valid).tolist() == [[1.5, 2.5, 3.5, 0.0], [1.5, 1.5, 0.0, 0.0]]


def test_critic_reads_each_turns_first_token_and_trains_there_only():
    b = spa_batch()
    returns, vmask = spa_rl_targets(b)
    first, last, valid = turn_spans(b)
    assert int(vmask.sum()) == 9 and bool((vmask.gather(1, first)[valid] == 1).all())
    assert bool((vmask.gather(1, last)[valid] == 0).all())  # turn ends hold the estimator's readings
    _A, R, _, _, _ = spa_rl_steps(b, 1.0, 0.95, 0.5, False)
    assert torch.allclose(returns.gather(1, first)[valid], R[valid])
    out = spa_rl(b)
    for i, lengths in enumerate(ACTIONS):
        for s in range(len(lengths)):
            tok = out[i][(b.turn[i] == s) & (b.mask[i] > 0)]
            assert bool((tok == tok[0]).all())
    assert float(out.gather(1, first)[valid].mean()) == pytest.approx(0.0, abs=1e-12)


def test_a_one_token_turn_has_no_critic_reading_and_value_zero():
    b = spa_batch(actions=[[1, 2], [2, 1]], errors=[[None, None], [None, None]])
    _returns, vmask = spa_rl_targets(b)
    first, _last, _valid = turn_spans(b)
    assert vmask.gather(1, first).tolist() == [[0.0, 1.0], [1.0, 0.0]]
    A, _R, _, _, _critic = spa_rl_steps(b, 1.0, 0.0, 0.5, False)  # lam = 0: A_t = r_t + V_{t+1} - V_t
    c = progress_readings(b.values, b)
    V0 = float(b.values[0, first[0, 1]])
    assert float(A[0, 0]) == pytest.approx(float(c[0, 0]) + 0.5 + V0 - 0.0)
    assert float(A[1, 1]) == pytest.approx(float(c[1, 1]) + 0.5)


def test_a_batch_without_turn_info_is_refused():
    b = spa_batch()
    b.turn_info = []
    with pytest.raises(ValueError, match="tool_error"):
        spa_rl(b)


def test_each_turns_summed_token_rewards_join_its_step_reward():
    b = spa_batch()
    b.values = torch.zeros_like(b.mask)  # c = 0, V = 0: with lam = 0, A_t = r_t = g_t + sum of the turn's tokens
    b.token_rewards = -0.1 * b.mask
    A, _, _, valid, _ = spa_rl_steps(b, 1.0, 0.0, 0.5, False)
    g = grounding(b, valid)
    lengths = torch.zeros_like(g)
    for i, row in enumerate(ACTIONS):
        lengths[i, :len(row)] = torch.tensor(row, dtype=D)
    assert torch.allclose(A, (g - 0.1 * lengths) * valid)
