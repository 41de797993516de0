"""R²VPO's objective: lam = 0 is the unclipped IS policy gradient; the variance penalty's gradient is
2 lam (r - 1) grad r everywhere (no hard zero region); stale samples weighted by min(pi_old/mu, 2)."""
import pytest
import torch

from tests.helpers import D, grad, random_batch, tokens
from workbench import ops, registry
from workbench.objectives.ppo import ppo_clip
from workbench.objectives.r2vpo import r2vpo
from workbench.recipes import get_recipe, with_overrides
from workbench.train.pipeline import Pipeline


def with_mu(seed, staleness=0.6):
    logp, old, A, mask = random_batch(seed, scale=0.4)
    mu = old + staleness * torch.randn(old.shape, generator=torch.Generator().manual_seed(seed + 9), dtype=D)
    return logp, old, A, mask, mu


@pytest.mark.covers("r2vpo")
def test_registered_abstract_only_with_our_defaults():
    e = registry.get("objective", "r2vpo")
    assert e.reads == ("mu_logp",) and {"lam": 1.0, "is_cap": 2.0}.items() <= e.defaults.items()
    assert e.family == "surrogate" and e.confidence == "abstract-only" and "Our reading" in e.fn.__doc__


@pytest.mark.covers("r2vpo")
@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
@pytest.mark.parametrize("seed", range(3))
def test_lam_zero_is_the_unclipped_is_policy_gradient(seed, agg):
    """Catalog test (1): lam = 0 leaves -agg(w r A), w = min(pi_old/mu, 2) (w = 1 on fresh data), with the
    gradient -w A r everywhere, also where PPO-clip's gradient is 0."""
    logp, old, A, mask, mu = with_mu(seed)
    loss, _ = r2vpo(logp, old, A, mask, mu_logp=mu, lam=0.0, agg=agg)
    w = torch.exp(old - mu).clamp(max=2.0)
    r = torch.exp(logp - old)
    expected = ops.aggregate(-w * r * A, mask, agg)
    assert loss.item() == pytest.approx(expected.item(), rel=1e-12)
    torch.testing.assert_close(grad(loss, logp), grad(expected, logp), rtol=1e-12, atol=1e-15)
    fresh, _ = r2vpo(logp, old, A, mask, mu_logp=old.clone(), lam=0.0, agg=agg)
    assert fresh.item() == pytest.approx(ops.aggregate(-r * A, mask, agg).item(), rel=1e-12)
    ppo, m = ppo_clip(logp, old, A, mask, agg=agg)
    clipped = (grad(ppo, logp) == 0) & (mask > 0) & (A != 0)
    assert m["clip/region"] > 0 and torch.all(grad(fresh, logp)[clipped] != 0)


@pytest.mark.covers("r2vpo")
@pytest.mark.parametrize("lam", [0.5, 3.0])
def test_penalty_gradient_is_two_lam_r_minus_one_times_grad_r_with_no_hard_zero_region(lam):
    """Catalog test (2): with A = 0 the per-token gradient w.r.t. logp is 2 lam (r - 1) r / N (grad r = r grad logp),
    nonzero for every r != 1, far outside PPO's band too, and growing with |r - 1|."""
    rs = [0.3, 0.8, 0.95, 1.0, 1.05, 1.2, 2.5]
    logp, old, A, mask = tokens(rs, [0.0] * len(rs))
    loss, _ = r2vpo(logp, old, A, mask, mu_logp=old.clone(), lam=lam)
    r = torch.tensor(rs, dtype=D)[:, None]
    torch.testing.assert_close(grad(loss, logp), 2 * lam * (r - 1) * r / len(rs), rtol=1e-12, atol=1e-15)
    g = grad(loss, logp).flatten()
    assert torch.all((g == 0) == (r.flatten() == 1.0))


@pytest.mark.covers("r2vpo")
def test_the_stale_weight_scales_both_terms_and_is_cap_none_turns_it_off():
    logp, old, A, mask, mu = with_mu(1)
    w = torch.exp(old - mu).clamp(max=2.0)
    assert (w[mask > 0] == 2.0).any() and (w[mask > 0] < 0.8).any()
    r = torch.exp(logp.detach() - old)
    loss, m = r2vpo(logp, old, A, mask, mu_logp=mu, lam=2.0)
    expected = ((w * (-r * A + 2.0 * (r - 1) ** 2)) * mask).sum() / mask.sum()
    assert loss.item() == pytest.approx(expected.item(), rel=1e-12)
    assert m["r2vpo/ratio_var"] == pytest.approx(float((w * (r - 1) ** 2 * mask).sum() / mask.sum()), rel=1e-12)
    off, m_off = r2vpo(logp, old, A, mask, mu_logp=mu, lam=2.0, is_cap=None)
    plain = ((-r * A + 2.0 * (r - 1) ** 2) * mask).sum() / mask.sum()
    assert off.item() == pytest.approx(plain.item(), rel=1e-12)
    assert m_off["r2vpo/ratio_var"] == pytest.approx(float(((r - 1) ** 2 * mask).sum() / mask.sum()), rel=1e-12)


@pytest.mark.covers("r2vpo")
def test_measured_variance_is_zero_on_policy():
    logp, old, A, mask = random_batch(2)
    _, m = r2vpo(logp.detach().clone().requires_grad_(True), logp.detach(), A, mask, mu_logp=logp.detach())
    assert m["r2vpo/ratio_var"] == 0.0 and m["ratio/mean"] == 1.0


@pytest.mark.covers("r2vpo")
@pytest.mark.parametrize("bad,match", [(dict(lam=-0.1), "lam"), (dict(is_cap=0.0), "is_cap")])
def test_bad_parameters_are_refused(bad, match):
    logp, old, A, mask = tokens([1.0, 1.1], [1.0, -1.0])
    with pytest.raises(ValueError, match=match):
        r2vpo(logp, old, A, mask, mu_logp=old.clone(), **bad)


@pytest.mark.parametrize("value", [0, -1.0])
def test_an_is_cap_that_is_not_positive_is_refused_when_the_recipe_is_built(value):
    with pytest.raises(ValueError, match=rf"objective 'r2vpo': is_cap must be > 0 or None, got {value}"):
        Pipeline(with_overrides(get_recipe("r2vpo"), {"objective": {"is_cap": value}}))
    Pipeline(with_overrides(get_recipe("r2vpo"), {"objective": {"is_cap": None}}))  # no stale-sample weight
