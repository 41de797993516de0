"""GAE advantages and the critic's returns."""
import pytest
import torch

from tests.helpers import critic_batch, make_batch
from workbench import ops
from workbench.advantages.gae import gae, gae_and_returns, gae_returns
from workbench.advantages.reinforce import discounted_returns


@pytest.mark.covers("gae")
def test_gae_lambda_one_is_return_minus_value_and_lambda_zero_is_td_error():
    b = critic_batch()
    from workbench.advantages.base import token_rewards

    r, V, m = token_rewards(b), b.values, b.mask
    a1, _ = gae_and_returns(r, V, m, gamma=0.9, lam=1.0)
    assert torch.allclose(a1, discounted_returns(r, m, 0.9) - V * m)
    a0, _ = gae_and_returns(r, V, m, gamma=0.9, lam=0.0)
    next_v = torch.cat([V[:, 1:], torch.zeros(2, 1, dtype=V.dtype)], 1) * torch.cat([m[:, 1:], torch.zeros(2, 1)], 1)
    assert torch.allclose(a0, (r + 0.9 * next_v - V) * m)


@pytest.mark.covers("gae")
def test_gae_with_zero_values_is_reward_to_go_and_skips_observation_tokens():
    b = critic_batch()
    b.values = torch.zeros_like(b.values)
    from workbench.advantages.base import token_rewards

    adv, ret = gae_and_returns(token_rewards(b), b.values, b.mask, 1.0, 1.0)
    assert torch.allclose(adv[0, :3], torch.ones(3, dtype=torch.float64)) and torch.allclose(ret, adv)
    # Inserting a masked observation token in the middle leaves policy-token advantages unchanged.
    b2 = critic_batch()
    gapped_mask = torch.tensor([[1, 0, 1, 1, 0], [1, 1, 1, 1, 0]], dtype=torch.float64)
    gapped_v = torch.zeros(2, 5, dtype=torch.float64)
    gapped_v[0, [0, 2, 3]], gapped_v[1, :4] = b2.values[0, :3], b2.values[1]
    r2 = torch.zeros(2, 5, dtype=torch.float64)
    r2[0, 3], r2[1, 3] = 1.0, -0.5
    gapped, _ = gae_and_returns(r2, gapped_v, gapped_mask, 0.9, 0.95)
    plain, _ = gae_and_returns(token_rewards(b2), b2.values, b2.mask, 0.9, 0.95)
    assert torch.allclose(gapped[0, [0, 2, 3]], plain[0, :3])


@pytest.mark.covers("gae", "value-loss")
def test_gae_whitening_and_returns():
    b = critic_batch()
    A = gae(b)
    assert ops.masked_mean(A, b.mask).abs() < 1e-6
    raw, ret = gae_and_returns(__import__("workbench.advantages.base", fromlist=["x"]).token_rewards(b),
                               b.values, b.mask, 1.0, 0.95)
    assert torch.allclose(gae_returns(b), ret) and torch.allclose(ret, (raw + b.values) * b.mask)
    with pytest.raises(ValueError, match="values"):
        gae(make_batch([1.0], [0]))
