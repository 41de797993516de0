"""PPO-clip and dual-clip: gradients, clip fractions, log-ratio clamp, input checks."""
import pytest
import torch

from tests.helpers import random_mask
from workbench import ops
from workbench.objectives.ppo import dual_clip, ppo_clip

pytestmark = pytest.mark.covers("ppo-clip")


def tokens(ratios, advantages):
    """One token per row at the given ratios and advantages; returns (logp leaf, old, A, mask)."""
    r = torch.as_tensor(ratios, dtype=torch.float64)
    A = torch.as_tensor(advantages, dtype=torch.float64).expand_as(r).clone()
    logp = torch.log(r).clone().requires_grad_(True)
    return logp, torch.zeros_like(r), A[:, None], torch.ones(len(r), 1, dtype=torch.float64)


def grad_of(fn, logp, old, A, mask, **kw):
    loss, metrics = fn(logp[:, None], old[:, None], A, mask, agg="seq-mean-token-sum", **kw)
    (g,) = torch.autograd.grad(loss * len(logp), logp)  # undo the mean: per-token gradient
    return g, metrics


def test_on_policy_gradient_is_minus_advantage():
    logp, old, A, mask = tokens([1.0, 1.0, 1.0], [2.0, -1.0, 0.5])
    g, metrics = grad_of(ppo_clip, logp, old, A.squeeze(1)[:, None], mask)
    assert torch.allclose(g, -A.squeeze(1))
    assert metrics["clip/region"] == 0 and metrics["clip/out_of_band"] == 0


@pytest.mark.parametrize("eps_low, eps_high", [(0.2, 0.2), (0.2, 0.28)])
def test_gradient_is_zero_exactly_where_the_clipped_branch_is_active(eps_low, eps_high):
    r = torch.linspace(0.5, 1.6, 45, dtype=torch.float64)
    for sign in (1.0, -1.0):
        logp, old, A, mask = tokens(r, sign)
        g, _ = grad_of(ppo_clip, logp, old, A, mask, eps_low=eps_low, eps_high=eps_high)
        clipped = (r > 1 + eps_high) if sign > 0 else (r < 1 - eps_low)
        assert torch.all(g[clipped] == 0)
        assert torch.allclose(g[~clipped], -sign * r[~clipped])  # d(-rA)/dlogp = -A r


def test_clip_fractions_active_never_exceed_out_of_band():
    g = torch.Generator().manual_seed(0)
    logp = torch.randn(16, 12, generator=g, dtype=torch.float64) * 0.3
    A = torch.randn(16, 1, generator=g, dtype=torch.float64).expand(16, 12)
    _, m = ppo_clip(logp, torch.zeros_like(logp), A, random_mask(16, 12, g))
    assert 0 < m["clip/region"] <= m["clip/out_of_band"]
    assert m["clip/region"] == pytest.approx(m["clip/low"] + m["clip/high"])


def test_logr_clamp_matches_verl_convention():
    logp, old = torch.tensor([[30.0]], dtype=torch.float64), torch.zeros(1, 1, dtype=torch.float64)
    A, mask = -torch.ones(1, 1, dtype=torch.float64), torch.ones(1, 1, dtype=torch.float64)
    loss, _ = ppo_clip(logp, old, A, mask, logr_clamp=20.0)
    assert loss.item() == pytest.approx(torch.exp(torch.tensor(20.0, dtype=torch.float64)).item())


@pytest.mark.covers("dual-clip")
def test_dual_clip_caps_negative_advantage_loss():
    r = torch.tensor([0.5, 1.0, 2.0, 3.5, 10.0], dtype=torch.float64)
    logp, old, A, mask = tokens(r, -1.0)
    g, m = grad_of(dual_clip, logp, old, A, mask, dual_clip_c=3.0)
    loss, _ = dual_clip(logp.detach()[:, None], old[:, None], A, mask, agg="seq-mean-token-sum")
    per_token = torch.minimum(torch.maximum(r, r.clamp(0.8, 1.2)), torch.tensor(3.0, dtype=torch.float64))
    assert loss.item() * len(r) == pytest.approx(per_token.sum().item())
    assert torch.all(g[r > 3] == 0) and m["clip/dual"] == pytest.approx(2 / 5)
    # identical to ppo-clip for A >= 0
    logp, old, A, mask = tokens(r, 1.0)
    assert torch.allclose(grad_of(dual_clip, logp, old, A, mask)[0], grad_of(ppo_clip, logp, old, A, mask)[0])
    with pytest.raises(ValueError, match="> 1"):
        ppo_clip(logp[:, None], old[:, None], A, mask, dual_clip_c=0.5)


def test_bad_inputs():
    x = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="advantages has shape"):
        ppo_clip(x, x, torch.zeros(2, 4), torch.ones(2, 3))
    with pytest.raises(ValueError, match="all zero"):
        ppo_clip(x, x, x, torch.zeros(2, 3))
    with pytest.raises(ValueError, match="NaN"):
        ppo_clip(x, x, torch.full((2, 3), float("nan")), torch.ones(2, 3))


def test_ratio_one_gives_the_reinforce_gradient_on_a_real_aggregation():
    g = torch.Generator().manual_seed(1)
    logp = torch.randn(4, 6, generator=g, dtype=torch.float64, requires_grad=True)
    A = torch.randn(4, 1, generator=g, dtype=torch.float64).expand(4, 6)
    mask = random_mask(4, 6, g)
    loss, _ = ppo_clip(logp, logp.detach(), A, mask, agg="seq-mean-token-mean")
    reinforce = ops.aggregate(-A * logp, mask, "seq-mean-token-mean")
    assert torch.allclose(torch.autograd.grad(loss, logp)[0], torch.autograd.grad(reinforce, logp)[0])
