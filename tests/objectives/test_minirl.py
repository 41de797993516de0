"""MiniRL: the staleness mask, the loss, and the first-order gap it neglects."""
import math

import pytest
import torch

from tests.helpers import D, grad, make_batch
from workbench import ops
from workbench.advantages.group import grpo
from workbench.objectives.minirl import first_order_gap, minirl_loss, staleness_mask


@pytest.mark.covers("minirl")
def test_minirl_on_policy_is_reinforce_with_group_mean_baseline():
    b = make_batch([1.0, 0.0, 0.0, 1.0, 0.5, 0.2, 0.9], [0, 0, 0, 0, 1, 1, 1], [2, 5, 3, 4, 1, 6, 2])
    A = grpo(b, scale="none")
    g = torch.Generator().manual_seed(0)
    logp = (-torch.rand(b.mask.shape, generator=g, dtype=D)).requires_grad_(True)
    same = logp.detach()
    loss, m = minirl_loss(logp, same, same, A, b.mask)
    reinforce = ops.aggregate(-A * logp, b.mask, "seq-mean-token-mean")
    assert torch.allclose(grad(loss, logp), grad(reinforce, logp), atol=1e-15)
    assert loss.item() == pytest.approx(-float(ops.masked_mean(A, b.mask, -1).mean()), abs=1e-15)
    assert m["minirl/masked_frac"] == 0 and m["minirl/w_mean"] == pytest.approx(1.0)
    # per token: -A_i / (B |y_i|)
    expected = -A / (b.size * b.mask.sum(-1, keepdim=True))
    assert torch.allclose(grad(loss, logp), expected * b.mask, atol=1e-15)


@pytest.mark.covers("minirl")
def test_minirl_mask_zeroes_only_tokens_past_the_bound_in_the_advantage_direction():
    r = torch.linspace(0.5, 1.6, 23, dtype=D)
    logr = torch.log(r).repeat(2)[:, None]
    A = torch.cat([torch.ones(23), -torch.ones(23)]).to(D)[:, None]
    mask = torch.ones_like(A)
    logp = logr.clone().requires_grad_(True)
    old = torch.zeros_like(logr)
    mu = old + torch.linspace(-0.7, 0.7, 46, dtype=D)[:, None]  # mismatch: w != pi_theta/pi_old
    eps_low, eps_high = 0.2, 0.28
    loss, m = minirl_loss(logp, old, mu, A, mask, eps_low=eps_low, eps_high=eps_high, agg="token-mean")
    g = grad(loss, logp)
    rr = torch.exp(logr)
    past = ((A > 0) & (rr > 1 + eps_high)) | ((A < 0) & (rr < 1 - eps_low))
    assert past.any() and (~past).any()
    assert torch.all(g[past] == 0)
    w = torch.exp(logr - mu)
    assert torch.allclose(g[~past], (-w * A / A.numel())[~past], atol=1e-15)
    # tokens past the bound against A's direction keep their gradient
    against = ((A > 0) & (rr < 1 - eps_low)) | ((A < 0) & (rr > 1 + eps_high))
    assert against.any() and torch.all(g[against] != 0)
    # M depends on pi_theta / pi_old only, never on mu
    assert torch.equal(staleness_mask(logp, old, A, eps_low=eps_low, eps_high=eps_high), (~past).to(D))
    assert m["minirl/masked_frac"] == pytest.approx(float(past.double().mean()))


@pytest.mark.covers("minirl")
def test_first_order_gap_is_second_order_and_grows_like_T_delta_squared():
    mask_of = lambda T: torch.ones(1, T, dtype=D)  # noqa: E731
    # exact to second order: gap = e_2(delta) + O((T delta)^3)
    g = torch.Generator().manual_seed(0)
    delta = torch.randn(1, 12, generator=g, dtype=D) * 1e-3
    gap = first_order_gap(torch.log1p(delta), mask_of(12))
    e2 = (delta.sum() ** 2 - (delta ** 2).sum()) / 2
    err = float((gap - e2).abs())
    assert err <= float(delta.abs().sum()) ** 3 and err < 0.02 * abs(float(e2))
    # no error at all for one token; exact (1 + d)^T - 1 - T d for equal deltas (worst case T^2 d^2 / 2)
    assert float(first_order_gap(torch.log(torch.tensor([[1.3]], dtype=D)), mask_of(1)).abs()) < 1e-15
    for T, d in [(8, 0.01), (64, 0.001)]:
        gap = float(first_order_gap(torch.full((1, T), math.log1p(d), dtype=D), mask_of(T)))
        assert gap == pytest.approx((1 + d) ** T - 1 - T * d, rel=1e-9)
        assert gap == pytest.approx(T * (T - 1) / 2 * d * d, rel=0.25)
    # independent zero-mean deltas: RMS gap = sigma^2 sqrt(T (T - 1) / 2) ~ T sigma^2 / sqrt(2)
    for T, sigma in [(16, 1e-3), (64, 1e-3), (64, 4e-3), (256, 5e-4)]:
        d = torch.randn(2000, T, generator=g, dtype=D) * sigma
        rms = float(first_order_gap(torch.log1p(d), torch.ones(2000, T, dtype=D)).pow(2).mean().sqrt())
        assert rms / (sigma ** 2 * math.sqrt(T * (T - 1) / 2)) == pytest.approx(1.0, abs=0.1)
    # padding is ignored
    padded = torch.tensor([[0.1, -0.2, 9.0]], dtype=D)
    assert torch.allclose(first_order_gap(padded, torch.tensor([[1.0, 1.0, 0.0]], dtype=D)),
                          first_order_gap(padded[:, :2], mask_of(2)), atol=1e-15)
