import math

import pytest
import torch

from workbench import kl

pytestmark = pytest.mark.covers("k1", "k2", "k3", "abs", "kl-straight-through")


def categorical_pair(seed=0, V=6, spread=1.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(V, generator=g, dtype=torch.float64) * spread,
            torch.randn(V, generator=g, dtype=torch.float64) * spread)


@pytest.mark.parametrize("kind", ["k1", "k2", "k3", "abs", "k1+", "k3+", "abs+"])
def test_zero_at_equal_logprobs_and_nonnegative(kind):
    logp = torch.linspace(-3, 0, 7, dtype=torch.float64)
    assert torch.all(kl.estimate(logp, logp, kind) == 0)
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(1000, generator=g), torch.randn(1000, generator=g)
    if kind.rstrip("+") in ("k2", "k3", "abs"):
        assert torch.all(kl.estimate(a, b, kind) >= 0)


def test_k1_and_k3_are_unbiased_for_kl_pi_ref_and_k2_is_not():
    logits_pi, logits_ref = categorical_pair(spread=1.5)
    logp_pi, logp_ref = torch.log_softmax(logits_pi, -1), torch.log_softmax(logits_ref, -1)
    exact = (logp_pi.exp() * (logp_pi - logp_ref)).sum()  # KL(pi || ref)
    # Expectation over y ~ pi computed exactly by summing over the vocabulary.
    expect = {k: (logp_pi.exp() * kl.estimate(logp_pi, logp_ref, k)).sum() for k in ("k1", "k2", "k3")}
    assert expect["k1"].item() == pytest.approx(exact.item(), rel=1e-9)
    assert expect["k3"].item() == pytest.approx(exact.item(), rel=1e-9)
    assert abs(expect["k2"].item() - exact.item()) > 1e-3


def test_k3_on_sampled_tokens_matches_kl_by_monte_carlo():
    logits_pi, logits_ref = categorical_pair(seed=1)
    logp_pi, logp_ref = torch.log_softmax(logits_pi, -1), torch.log_softmax(logits_ref, -1)
    exact = (logp_pi.exp() * (logp_pi - logp_ref)).sum().item()
    y = torch.multinomial(logp_pi.exp(), 200_000, replacement=True, generator=torch.Generator().manual_seed(0))
    samples = kl.estimate(logp_pi[y], logp_ref[y], "k3")
    assert samples.min() >= 0
    assert samples.mean().item() == pytest.approx(exact, abs=4 * samples.std().item() / math.sqrt(len(y)))


def test_straight_through_has_k3_value_and_k2_gradient():
    logp = torch.tensor([-0.3, -1.2, -2.0], dtype=torch.float64, requires_grad=True)
    ref = torch.tensor([-0.5, -0.7, -2.5], dtype=torch.float64)
    st = kl.estimate(logp, ref, "k3+")
    assert torch.allclose(st, kl.estimate(logp, ref, "k3"))
    (g_st,) = torch.autograd.grad(st.sum(), logp)
    (g_k2,) = torch.autograd.grad(kl.estimate(logp, ref, "k2").sum(), logp)
    assert torch.allclose(g_st, g_k2)


def test_straight_through_monte_carlo_gradient_is_the_reverse_kl_gradient():
    """On-policy: E_pi[grad k2(y)] (score-function form) = grad KL(pi || ref) exactly for a categorical."""
    theta, logits_ref = categorical_pair(seed=2)
    theta.requires_grad_(True)
    logp_ref = torch.log_softmax(logits_ref, -1)
    logp = torch.log_softmax(theta, -1)
    exact = (logp.exp() * (logp - logp_ref)).sum()
    (g_exact,) = torch.autograd.grad(exact, theta)
    logp = torch.log_softmax(theta, -1)
    p = logp.exp().detach()
    pathwise = (p * kl.estimate(logp, logp_ref, "k3+")).sum()  # E over y ~ sg(pi) of k(y)
    (g_st,) = torch.autograd.grad(pathwise, theta)
    assert torch.allclose(g_st, g_exact, atol=1e-10)


def test_stability_near_zero_and_with_clamps():
    logp = torch.tensor([1e-9, -1e-9], dtype=torch.float64)
    assert torch.all(kl.estimate(logp, torch.zeros(2, dtype=torch.float64), "k3") >= 0)
    big = kl.estimate(torch.tensor([-40.0]), torch.tensor([0.0]), "k3", logr_clamp=20, value_clamp=10)
    assert big.item() == 10.0


def test_bad_inputs():
    with pytest.raises(ValueError, match="unknown KL estimator"):
        kl.estimate(torch.zeros(2), torch.zeros(2), "k4")
    with pytest.raises(ValueError, match="shape"):
        kl.estimate(torch.zeros(2), torch.zeros(3), "k1")


def test_straight_through_clamps_the_value_but_keeps_the_full_k2_gradient():
    """Regression (found against verl's `k3+`): clamps must not zero the gradient of far-off tokens."""
    logp = torch.tensor([-1.0, -6.0, -30.0], dtype=torch.float64, requires_grad=True)
    ref = torch.tensor([-1.5, -2.0, -2.0], dtype=torch.float64)
    out = kl.estimate(logp, ref, "k3+", logr_clamp=20, value_clamp=10)
    assert out[1:].tolist() == [10.0, 10.0]
    (g,) = torch.autograd.grad(out.sum(), logp)
    assert torch.allclose(g, (logp - ref).detach())
