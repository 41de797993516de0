"""The step-critic helpers shared by vl-dac, poad, hiper, digirl and spa-rl: turn spans, step rewards, step GAE;
and the pipeline's refusal of a critic method without a value head."""
import pytest
import torch

from tests.advantages.step_batches import D, episode_batch, layout
from workbench.advantages.gae import gae_and_returns
from workbench.advantages.step_critic import (broadcast_steps, read_steps, step_gae, step_rewards, step_targets,
                                              turn_spans, write_steps, zscore)
from workbench.recipes import Recipe, use
from workbench.train.pipeline import Pipeline

KEYS = ("vl-dac", "poad", "hiper", "digirl", "spa-rl")
ACTIONS = [[3, 1, 2], [2, 2], [1, 4, 1, 2]]


@pytest.mark.covers("vl-dac", "poad", "hiper", "digirl", "spa-rl")
def test_turn_spans_find_each_turns_first_and_last_policy_token():
    b = episode_batch(ACTIONS)
    first, last, valid = turn_spans(b)
    _, _, f, l = layout(ACTIONS)
    assert torch.equal(valid, torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1]], dtype=torch.bool))
    assert torch.equal(first, f * valid) and torch.equal(last, l * valid)
    x = torch.arange(b.mask.numel(), dtype=D).view(b.mask.shape)
    assert torch.equal(read_steps(x, first, valid), (f * valid).to(D) + torch.arange(3)[:, None] * b.mask.shape[1]
                       * valid)
    written = write_steps(torch.ones(3, 4, dtype=D), first, valid, b.mask.shape[1])
    assert written.sum() == valid.sum() and bool((written[b.mask == 0] == 0).all())


@pytest.mark.covers("vl-dac", "poad", "hiper", "digirl", "spa-rl")
def test_broadcast_gives_every_policy_token_of_a_turn_its_step_value_and_nothing_else():
    b = episode_batch(ACTIONS)
    x = torch.arange(12, dtype=D).view(3, 4) + 1
    out = broadcast_steps(x, b)
    policy = b.mask > 0
    assert torch.equal(out[policy], x.gather(1, b.turn.clamp(min=0))[policy])
    assert bool((out[~policy] == 0).all())


@pytest.mark.covers("vl-dac", "poad", "hiper", "digirl", "spa-rl")
def test_step_rewards_keep_the_return_and_put_extra_outcome_and_token_rewards_in_their_steps():
    b = episode_batch(ACTIONS, step_rewards=[[0.5, 0.0, 1.0], [0.0, 2.0], [0.0, 0.0, -1.0, 0.5]])
    _, _, valid = turn_spans(b)
    assert torch.equal(step_rewards(b, 4), b.turn_rewards * valid)
    b.rewards = b.rewards + torch.tensor([0.25, 0.0, 1.0], dtype=D)          # a reward function's outcome term
    b.token_rewards = torch.full_like(b.mask, -0.1) * b.mask                   # e.g. -beta KL per policy token
    r = step_rewards(b, 4)
    assert torch.allclose(r.sum(-1), b.rewards + b.token_rewards.sum(-1))
    assert r[0, 2] == pytest.approx(1.0 + 0.25 - 0.2) and r[0, 0] == pytest.approx(0.5 - 0.3)
    assert r[2, 3] == pytest.approx(0.5 + 1.0 - 0.2) and r[1, 2] == 0 and r[1, 3] == 0


@pytest.mark.covers("vl-dac", "poad", "hiper", "digirl", "spa-rl")
def test_step_gae_is_token_gae_on_step_arrays_and_zscore_uses_the_bessel_std():
    g = torch.Generator().manual_seed(3)
    r, V = torch.randn(3, 4, generator=g, dtype=D), torch.randn(3, 4, generator=g, dtype=D)
    valid = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1]], dtype=torch.bool)
    a, ret = step_gae(r, V, valid, 0.9, 0.8)
    a_ref, ret_ref = gae_and_returns(r, V, valid.to(D), 0.9, 0.8)
    assert torch.equal(a, a_ref) and torch.equal(ret, ret_ref)
    # hand check of the last two steps of row 1: A_1 = r_1 - V_1, A_0 = r_0 + .9 V_1 - V_0 + .72 A_1
    a1 = r[1, 1] - V[1, 1]
    assert a[1, 1] == pytest.approx(float(a1)) and a[1, 0] == pytest.approx(float(r[1, 0] + .9 * V[1, 1] - V[1, 0]
                                                                                 + .72 * a1))
    z = zscore(a, valid)
    assert float(z[valid].mean()) == pytest.approx(0.0, abs=1e-12)
    assert float(z[valid].std()) == pytest.approx(1.0, abs=1e-6) and bool((z[~valid] == 0).all())


@pytest.mark.covers("vl-dac", "poad", "hiper", "digirl", "spa-rl")
def test_step_targets_write_one_return_per_step_at_its_value_token():
    b = episode_batch(ACTIONS)
    first, _, valid = turn_spans(b)
    R = torch.arange(12, dtype=D).view(3, 4) + 1
    returns, vmask = step_targets(R, first, valid, b)
    assert vmask.sum() == valid.sum() == 9
    assert torch.equal(returns[vmask > 0], R[valid]) and bool((returns[vmask == 0] == 0).all())


@pytest.mark.covers("vl-dac", "poad", "hiper", "digirl", "spa-rl")
def test_turn_spans_refuse_policy_tokens_without_a_turn_id():
    b = episode_batch(ACTIONS)
    b.turn[0, 0] = -1
    with pytest.raises(ValueError, match="turn id -1"):
        turn_spans(b)


@pytest.mark.covers("vl-dac", "poad", "hiper", "digirl", "spa-rl")
@pytest.mark.parametrize("key", KEYS)
def test_a_critic_method_without_a_value_head_is_refused_with_the_fix(key):
    with pytest.raises(ValueError, match=rf"advantage:{key} reads \[.*'values'.*give the recipe a value loss"):
        Pipeline(Recipe(key="r", title="t", summary="s", advantage=[key]))
    Pipeline(Recipe(key="r", title="t", summary="s", advantage=[key], value=use("value-loss")))

