"""dots-rr-clip: the replay-aware surrogate is sg(pi_old/mu) times PPO-clip on pi/pi_old, token by token."""
import pytest
import torch

from tests.helpers import D, grad, random_batch, tokens
from workbench import registry
from workbench.objectives.decoupled import dots_rr_clip
from workbench.objectives.tis import tis_weights
from workbench.objectives.ppo import ppo_clip

EPS = 0.2


def replayed(seed, B=6, T=7, staleness=0.5):
    """random_batch plus behaviour log-probs mu a stale policy away from old (pi_old/mu in about [0.2, 5])."""
    logp, old, A, mask = random_batch(seed, B, T, scale=0.3)
    mu = old + staleness * torch.randn(B, T, generator=torch.Generator().manual_seed(seed + 50), dtype=D)
    return logp, old, A, mask, mu


def reference_form(logp, old, A, mu, eps=EPS):
    """The surrogate as the paper writes it, per token [B, T]: the ratio to mu clipped around pi_old/mu."""
    r_pi, r_old = torch.exp(logp - mu), torch.exp(old - mu)
    return torch.maximum(-A * r_pi, -A * torch.clamp(r_pi, r_old * (1 - eps), r_old * (1 + eps)))


@pytest.mark.covers("dots-rr-clip")
def test_registered_reading_mu_with_ppo_defaults():
    e = registry.get("objective", "dots-rr-clip")
    assert e.reads == ("mu_logp",) and {"eps_low": 0.2, "eps_high": 0.2, "dual_clip_c": None}.items() <= \
        e.defaults.items()
    assert e.family == "surrogate" and e.equation and e.fn.__doc__


@pytest.mark.covers("dots-rr-clip")
@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum"])
@pytest.mark.parametrize("seed", range(3))
def test_fresh_data_is_exactly_ppo_clip(seed, agg):
    """Catalog test (1): mu = pi_old gives weight 1."""
    logp, old, A, mask = random_batch(seed, scale=0.4)
    loss, m = dots_rr_clip(logp, old, A, mask, mu_logp=old.clone(), agg=agg)
    ref, ref_m = ppo_clip(logp, old, A, mask, agg=agg)
    assert loss.item() == ref.item() and m == ref_m and m["clip/region"] > 0
    assert torch.equal(grad(loss, logp), grad(ref, logp))


@pytest.mark.covers("dots-rr-clip")
@pytest.mark.parametrize("seed", range(3))
def test_identity_holds_token_by_token_in_value_and_gradient(seed):
    """Catalog test (2): one token at a time (a one-hot mask, token-mean = that token's loss), our loss equals the
    paper's max(-A pi/mu, -A clip(pi/mu, (pi_old/mu)(1 -+ eps))) and its gradient."""
    logp, old, A, mask, mu = replayed(seed)
    paper = reference_form(logp, old, A, mu)
    w = tis_weights(old, mu, mask, cap=float("inf"))  # the behaviour weight pi_old / mu
    assert (w[mask > 0] < 0.7).any() and (w[mask > 0] > 1.4).any()  # genuinely stale rows
    for b, t in torch.nonzero(mask).tolist():
        one = torch.zeros_like(mask)
        one[b, t] = 1.0
        loss, _ = dots_rr_clip(logp, old, A, one, mu_logp=mu)
        torch.testing.assert_close(loss, paper[b, t], rtol=1e-12, atol=1e-14)
        torch.testing.assert_close(grad(loss, logp), grad(paper[b, t], logp), rtol=1e-12, atol=1e-14)


@pytest.mark.covers("dots-rr-clip")
def test_zero_gradient_iff_pi_over_pi_old_is_past_the_bound_in_the_advantage_direction():
    """Catalog test (3), with stale behaviour weights (pi_old/mu = 0.5 and 3): the clip acts on pi/pi_old, not on
    pi/mu; elsewhere the gradient is -A w r / N."""
    rs = [0.5, 0.79, 0.81, 1.0, 1.19, 1.21, 2.0]
    for sign in (1.0, -1.0):
        for w in (0.5, 3.0):
            logp, old, A, mask = tokens(rs, [sign] * len(rs))
            mu = old - torch.log(torch.tensor(w, dtype=D))
            loss, _ = dots_rr_clip(logp, old, A, mask, mu_logp=mu)
            g = grad(loss, logp).flatten()
            past = torch.tensor([(sign > 0 and r > 1 + EPS) or (sign < 0 and r < 1 - EPS) for r in rs])
            assert torch.all((g == 0) == past)
            live = torch.tensor(rs, dtype=D)[~past]
            torch.testing.assert_close(g[~past], -sign * w * live / len(rs), rtol=1e-12, atol=0)


@pytest.mark.covers("dots-rr-clip")
def test_the_behaviour_weight_carries_no_gradient_and_mu_shape_is_checked():
    logp, old, A, mask, mu = replayed(0)
    mu = mu.clone().requires_grad_(True)
    loss, _ = dots_rr_clip(logp, old, A, mask, mu_logp=mu)
    assert torch.autograd.grad(loss, mu, allow_unused=True)[0] is None
    with pytest.raises(ValueError, match="mu_logp has shape"):
        dots_rr_clip(logp, old, A, mask, mu_logp=mu[:, :3])


@pytest.mark.covers("dots-rr-clip")
@pytest.mark.parametrize("seed", range(2))
def test_a_cap_truncates_the_behaviour_weight_and_an_infinite_one_is_the_papers(seed):
    """cap (ours): min(pi_old/mu, cap) in place of the weight; None (the default) leaves it untruncated, the paper's
    form."""
    logp, old, A, mask, mu = replayed(seed)
    assert dots_rr_clip(logp, old, A, mask, mu_logp=mu, cap=1e9)[0].item() == \
        dots_rr_clip(logp, old, A, mask, mu_logp=mu)[0].item()
    capped, _ = dots_rr_clip(logp, old, A, mask, mu_logp=mu, cap=1.0)
    w = torch.clamp(torch.exp(old - mu), max=1.0) * mask
    r = torch.exp(logp - old)
    per_token = w * torch.maximum(-A * r, -A * torch.clamp(r, 1 - EPS, 1 + EPS))
    torch.testing.assert_close(capped, (per_token * mask).sum() / mask.sum(), rtol=1e-12, atol=1e-14)
    assert registry.get("objective", "dots-rr-clip").defaults["cap"] is None
