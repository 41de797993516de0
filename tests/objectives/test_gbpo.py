"""GBPO: the target ratio's range, the L1 regression's gradient (zero at the target, toward it from either side),
and the bandit fixed point pi* = (1 +- eps) pi0 split at the median."""
import pytest
import torch

from tests.helpers import D, grad, make_batch, random_batch, tokens
from workbench import registry
from workbench.advantages.gbpo import gbpo as gbpo_advantage
from workbench.objectives.gbpo import gbpo, target_ratio


@pytest.mark.covers("gbpo")
def test_gbpo_registered_with_the_reference_defaults():
    e = registry.get("objective", "gbpo")
    assert e.reads == ("target_adv",) and {"eps_low": 0.2, "eps_high": 0.2}.items() <= e.defaults.items()
    assert e.family == "surrogate" and e.confidence == "exact" and e.equation and e.fn.__doc__


@pytest.mark.covers("gbpo")
@pytest.mark.parametrize("eps_low,eps_high", [(0.2, 0.2), (0.1, 0.3), (0.0, 0.28)])
def test_target_ratio_lies_in_the_band_and_rises_with_the_target_advantage(eps_low, eps_high):
    """Catalog test (2), including saturating and infinite target advantages."""
    t = torch.cat([torch.randn(200, generator=torch.Generator().manual_seed(0), dtype=D) * 5,
                   torch.tensor([-1e6, 1e6, -float("inf"), float("inf"), 0.0], dtype=D)]).sort().values
    rho = target_ratio(t, eps_low=eps_low, eps_high=eps_high)
    assert torch.all(rho >= 1 - eps_low) and torch.all(rho <= 1 + eps_high)
    assert rho[0] == pytest.approx(1 - eps_low, abs=1e-15) and rho[-1] == pytest.approx(1 + eps_high, abs=1e-15)
    assert torch.all(rho[1:] >= rho[:-1])
    assert target_ratio(torch.zeros(1, dtype=D), eps_low=eps_low, eps_high=eps_high).item() == pytest.approx(
        1 + (eps_high - eps_low) / 2)


@pytest.mark.covers("gbpo")
def test_zero_loss_and_zero_gradient_when_every_ratio_equals_its_target():
    """Catalog test (1). Ratios are set to their targets exactly (tokens whose exp(log rho*) does not round-trip
    in float64 are masked out, so "equal" is exact), with advantages of both signs."""
    g = torch.Generator().manual_seed(1)
    t = torch.randn(6, 8, generator=g, dtype=D) * 2
    A = torch.randn(6, 8, generator=g, dtype=D)
    rho = target_ratio(t)
    logp = torch.log(rho).requires_grad_(True)
    old = torch.zeros_like(rho)
    mask = (torch.exp(logp.detach()) == rho).to(D)
    assert mask.sum() > 24
    loss, m = gbpo(logp, old, A, mask, target_adv=t)
    assert loss.item() == 0.0 and m["gbpo/abs_gap"] == 0.0
    assert torch.all(grad(loss, logp) == 0)


@pytest.mark.covers("gbpo")
def test_gradient_pulls_the_ratio_to_its_target_from_either_side_whatever_the_sign_of_a():
    """d loss / d logp = sign(r - rho*) |A| r / N: below the target r is pushed up, above it down, and past the
    PPO band the pull is still there (no clipped zero-gradient region)."""
    rs = [0.5, 0.9, 1.1, 1.5]
    for sign in (1.0, -1.0):
        logp, old, A, mask = tokens(rs, [sign * 2.0] * 4)
        t = torch.zeros_like(A)  # rho* = 1
        loss, _ = gbpo(logp, old, A, mask, target_adv=t)
        expected = torch.tensor([[-1.0], [-1.0], [1.0], [1.0]], dtype=D) * 2.0 * torch.tensor(rs, dtype=D)[:, None] / 4
        torch.testing.assert_close(grad(loss, logp), expected, rtol=0, atol=1e-15)


@pytest.mark.covers("gbpo")
def test_loss_value_is_the_aggregated_weighted_l1_gap():
    logp, old, A, mask = random_batch(3)
    t = torch.randn(A.shape, generator=torch.Generator().manual_seed(4), dtype=D)
    rho = 0.8 + 0.4 * torch.sigmoid(t)
    per_token = (torch.exp(logp.detach() - old) - rho).abs() * A.abs()
    for agg in ("token-mean", "seq-mean-token-mean"):
        loss, m = gbpo(logp, old, A, mask, target_adv=t, agg=agg)
        expected = (per_token * mask).sum() / mask.sum() if agg == "token-mean" else \
            ((per_token * mask).sum(-1) / mask.sum(-1)).mean()
        assert loss.item() == pytest.approx(expected.item(), rel=1e-12)
    r = torch.exp(logp.detach() - old)
    out = ((r > 1.2) | (r < 0.8)).to(D)
    assert m["clip/out_of_band"] == pytest.approx(float((out * mask).sum() / mask.sum()))


BANDIT_PI0 = torch.tensor([0.1, 0.3, 0.2, 0.4], dtype=D)
BANDIT_Q = torch.tensor([4.0, 0.0, 1.0, 2.0], dtype=D)  # pi0-mass above the median 1.5: 0.1 + 0.4 = 1/2
BANDIT_ROWS = torch.tensor([0] * 1 + [1] * 3 + [2] * 2 + [3] * 4)  # 10 equally weighted rows: exactly pi0


def bandit_loss(theta, batch, advantages, eps):
    """The exact expectation under pi0 of GBPO's loss: the rows hold each action in proportion to pi0."""
    logp = torch.log_softmax(theta, 0)[BANDIT_ROWS][:, None]
    old = torch.log(BANDIT_PI0)[BANDIT_ROWS][:, None]
    return gbpo(logp, old, advantages, batch.mask, target_adv=batch.target_adv, eps_low=eps, eps_high=eps)[0]


@pytest.mark.covers("gbpo")
@pytest.mark.parametrize("eps,start", [(0.2, "pi0"), (0.2, "uniform"), (0.1, "random")])
def test_bandit_fixed_point_is_one_plus_minus_eps_times_pi0_split_at_the_median(eps, start):
    """Catalog test (3): a 4-armed bandit, pi0 as one group of 10 equally weighted rows, the gbpo advantage at a
    small temperature (the BPO limit: sigma(target_adv) in {0, 1}) and the exact expected loss minimized over the
    logits. The minimum is pi* = (1 + eps) pi0 above the median of Q, (1 - eps) pi0 below, with loss 0 there."""
    batch = make_batch(BANDIT_Q[BANDIT_ROWS], [0] * 10, lengths=[1] * 10)
    advantages = gbpo_advantage(batch, temperature=1e-3)
    above = BANDIT_Q > 1.5
    pi_star = BANDIT_PI0 * (1 + eps * (2 * above.to(D) - 1))
    assert pi_star.sum().item() == pytest.approx(1.0, abs=1e-15)
    assert bandit_loss(torch.log(pi_star), batch, advantages, eps).item() == pytest.approx(0.0, abs=1e-12)
    init = {"pi0": torch.log(BANDIT_PI0), "uniform": torch.zeros(4, dtype=D),
            "random": torch.randn(4, generator=torch.Generator().manual_seed(5), dtype=D)}[start]
    theta = init.clone().requires_grad_(True)
    opt = torch.optim.Adam([theta], lr=2e-2)
    decay = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: 1 / (1 + k / 50))  # subgradient steps must shrink
    for _ in range(800):
        opt.zero_grad()
        bandit_loss(theta, batch, advantages, eps).backward()
        opt.step()
        decay.step()
    torch.testing.assert_close(torch.softmax(theta.detach(), 0), pi_star, rtol=0, atol=1e-3)


@pytest.mark.covers("gbpo")
def test_missing_or_misshapen_target_and_bad_eps_are_refused():
    logp, old, A, mask = tokens([1.0, 1.1], [1.0, -1.0])
    with pytest.raises(ValueError, match="target_adv"):
        gbpo(logp, old, A, mask, target_adv=None)
    with pytest.raises(ValueError, match="target_adv"):
        gbpo(logp, old, A, mask, target_adv=torch.zeros(3, 1, dtype=D))
    with pytest.raises(ValueError, match="eps_low"):
        gbpo(logp, old, A, mask, target_adv=torch.zeros_like(A), eps_low=1.0)
