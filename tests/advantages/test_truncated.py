"""T-PPO's extended GAE over truncated responses and its value mask (finished responses only)."""
import pytest
import torch

from tests.helpers import D, grad, random_mask
from workbench.advantages.gae import gae_and_returns
from workbench.advantages.truncated import egae, egae_value_mask
from workbench.recipes import get_recipe, with_overrides
from workbench.train.pipeline import Pipeline
from workbench.values import value_loss


def value_batch(seed, B=5, T=9):
    g = torch.Generator().manual_seed(seed)
    mask = random_mask(B, T, g, min_len=2)
    mask[0, 1] = 0.0 if mask[0].sum() > 3 else mask[0, 1]  # an interior observation token
    values = torch.randn(B, T, generator=g, dtype=D)
    rewards = torch.randn(B, T, generator=g, dtype=D) * mask * 0.3
    return rewards, values, mask


@pytest.mark.covers("t-ppo")
def test_egae_on_finished_responses_is_gae():
    rewards, values, mask = value_batch(0)
    finished = torch.tensor([True, False, True, False, True])
    adv, ret = egae(rewards, values, mask, finished, gamma=0.99, lam=0.95)
    ref_adv, ref_ret = gae_and_returns(rewards, values, mask, 0.99, 0.95)
    assert torch.equal(adv[finished], ref_adv[finished]) and torch.equal(ret[finished], ref_ret[finished])
    assert not torch.allclose(adv[~finished], ref_adv[~finished])
    all_adv, _ = egae(rewards, values, mask, torch.ones(5, dtype=torch.bool), gamma=0.99, lam=0.95)
    assert torch.equal(all_adv, ref_adv)


@pytest.mark.covers("t-ppo")
def test_egae_truncated_gamma_lambda_one_telescopes_to_last_value_minus_value():
    _, values, mask = value_batch(1)
    adv, ret = egae(torch.zeros_like(values), values, mask, torch.zeros(5, dtype=torch.bool), gamma=1.0, lam=1.0)
    for i in range(5):
        valid = torch.nonzero(mask[i]).flatten()
        v_last = values[i, valid[-1]]
        assert torch.allclose(adv[i, valid], v_last - values[i, valid], atol=1e-14)
        assert torch.allclose(ret[i, valid], v_last.expand(len(valid)), atol=1e-14)


@pytest.mark.covers("t-ppo")
def test_egae_matches_the_explicit_truncated_sum():
    rewards, values, mask = value_batch(2)
    gamma, lam = 0.9, 0.8
    adv, _ = egae(rewards, values, mask, torch.zeros(5, dtype=torch.bool), gamma=gamma, lam=lam)
    for i in range(5):
        idx = torch.nonzero(mask[i]).flatten().tolist()
        v = [float(values[i, t]) for t in idx] + [float(values[i, idx[-1]])]  # V(s_l) := V(s_{l-1})
        r = [float(rewards[i, t]) for t in idx]
        delta = [r[j] + gamma * v[j + 1] - v[j] for j in range(len(idx))]
        for j, t in enumerate(idx):
            expected = sum((gamma * lam) ** k * delta[j + k] for k in range(len(idx) - j))
            assert float(adv[i, t]) == pytest.approx(expected, abs=1e-12)


@pytest.mark.covers("t-ppo")
def test_value_loss_ignores_truncated_unfinished_responses():
    rewards, values, mask = value_batch(3)
    finished = torch.tensor([True, False, True, False, False])
    _, returns = egae(rewards, values, mask, finished, gamma=1.0, lam=0.95)
    v = values.clone().requires_grad_(True)
    vmask = egae_value_mask(mask, finished)
    loss, _ = value_loss(v, values, returns, vmask, clip_eps=None)
    gv = grad(loss, v)
    assert torch.all(gv[~finished] == 0) and torch.any(gv[finished] != 0)
    assert torch.equal(vmask[finished], mask[finished]) and torch.all(vmask[~finished] == 0)


@pytest.mark.covers("t-ppo")
def test_registered_t_ppo_equals_gae_when_nothing_is_truncated():
    from workbench.advantages.gae import gae, gae_targets
    from workbench.advantages.truncated import truncated_gae, truncated_gae_targets
    from workbench.batch import RolloutBatch

    b = RolloutBatch.from_rewards([1.0, 0.0, 0.5], [0, 0, 1], [3, 2, 4])
    b.values = torch.randn(b.mask.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * b.mask
    b.truncated = torch.zeros(3, dtype=torch.bool)
    assert torch.allclose(truncated_gae(b), gae(b))
    assert torch.allclose(truncated_gae_targets(b)[0], gae_targets(b)[0])
    b.truncated = torch.tensor([True, False, False])
    returns, value_mask = truncated_gae_targets(b)
    assert torch.all(value_mask[0] == 0) and torch.equal(value_mask[1:], b.mask[1:])


@pytest.mark.parametrize("overrides, message", [
    ({"gamma": -1e9}, r"advantage 't-ppo': gamma \(the discount\) must be in \[0, 1\], got -1000000000.0"),
    ({"lam": 1.5}, r"lam \(the GAE trace decay\) must be in \[0, 1\], got 1.5"),
])
def test_a_discount_outside_0_1_is_refused_when_the_recipe_is_built(overrides, message):
    """gamma = -1e9 trained a step to an infinite loss (the pipeline fuzz)."""
    with pytest.raises(ValueError, match=message):
        Pipeline(with_overrides(get_recipe("t-ppo"), {"advantage:t-ppo": overrides}))
