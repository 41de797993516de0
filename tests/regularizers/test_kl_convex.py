"""ReMix's KL-Convex term: lam = 1 is the KL to the base only (GRPO's KL term with k2), lam = 0 the KL to the
precedent (pi_old) only, the convex mix between; k2 by hand; refusals."""
import pytest
import torch

from tests.helpers import GROUPS, LENGTHS, REWARDS, make_batch
from workbench import ops, registry
from workbench.context import Forward
from workbench.regularizers.kl_convex import check_kl_convex, kl_convex
from workbench.regularizers.kl_penalty import kl_penalty

pytestmark = pytest.mark.covers("remix")


def toy(seed=1):
    g = torch.Generator().manual_seed(seed)
    b = make_batch(REWARDS, GROUPS, LENGTHS)
    logp = (torch.randn(b.mask.shape, generator=g, dtype=torch.float64) - 1.0).requires_grad_(True)
    b.ref_logp = torch.randn(b.mask.shape, generator=g, dtype=torch.float64) - 1.0
    b.old_logp = logp.detach() + 0.2 * torch.randn(b.mask.shape, generator=g, dtype=torch.float64)
    return b, logp


def grad(loss, x):
    return torch.autograd.grad(loss, x, retain_graph=True)[0]


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
def test_lam_one_is_the_kl_to_the_base_only(agg):
    """Catalog test (2): lam = 1 is kl-penalty with k2 to the reference; the precedent does not enter."""
    b, logp = toy()
    ours, m = kl_convex(Forward(logp), b, agg=agg, beta=0.04, lam=1.0)
    theirs, _ = kl_penalty(Forward(logp), b, agg=agg, beta=0.04, estimator="k2")
    assert torch.allclose(ours, theirs, rtol=0, atol=1e-15) and torch.allclose(grad(ours, logp), grad(theirs, logp))
    b.old_logp = b.old_logp + 5.0
    moved, _ = kl_convex(Forward(logp), b, agg=agg, beta=0.04, lam=1.0)
    assert torch.equal(moved, ours)


def test_lam_zero_is_the_kl_to_the_precedent_only():
    """Catalog test (2): lam = 0 is beta agg(k2(pi, pi_old)); the base does not enter."""
    b, logp = toy()
    ours, m = kl_convex(Forward(logp), b, beta=0.5, lam=0.0)
    by_hand = 0.5 * ops.aggregate(0.5 * (logp - b.old_logp) ** 2, b.mask, "token-mean")
    assert torch.allclose(ours, by_hand, rtol=0, atol=1e-15)
    b.ref_logp = b.ref_logp - 7.0
    assert torch.equal(kl_convex(Forward(logp), b, beta=0.5, lam=0.0)[0], ours)
    by_hand_kl = ops.masked_mean(0.5 * (logp.detach() - b.old_logp) ** 2, b.mask)
    assert m["remix/kl_precedent"] == pytest.approx(float(by_hand_kl))


def test_the_term_is_the_convex_mix_and_zero_at_the_step_start():
    b, logp = toy()
    base, _ = kl_convex(Forward(logp), b, beta=1.0, lam=1.0)
    prec, _ = kl_convex(Forward(logp), b, beta=1.0, lam=0.0)
    mixed, _ = kl_convex(Forward(logp), b, beta=1.0, lam=0.3)
    assert torch.allclose(mixed, 0.3 * base + 0.7 * prec, rtol=0, atol=1e-14)
    b.old_logp, b.ref_logp = logp.detach().clone(), logp.detach().clone()  # first optimizer step, just reincarnated
    zero, m = kl_convex(Forward(logp), b, beta=1.0, lam=0.5)
    assert zero.item() == 0.0 and float(grad(zero, logp).abs().max()) == 0.0
    assert m == {"remix/kl_base": 0.0, "remix/kl_precedent": 0.0}


def test_registered_with_the_run_coefficient_and_k2():
    entry = registry.get("regularizer", "remix")
    assert entry.coefficients == {"kl_coef": "beta"} and entry.kl_estimator == "estimator"
    assert {k: entry.defaults[k] for k in ("beta", "lam", "estimator")} == {"beta": 0.04, "lam": 0.5, "estimator": "k2"}
    assert set(entry.reads) == {"ref_logp", "old_logp"}


@pytest.mark.parametrize("kw, match", [({"lam": 1.5}, "lam=1.5"), ({"lam": -0.1}, "lam=-0.1"),
                                       ({"beta": -1.0}, "beta=-1.0"), ({"estimator": "k4"}, "estimator='k4'")])
def test_bad_settings_are_refused_naming_the_parameter(kw, match):
    with pytest.raises(ValueError, match=match):
        check_kl_convex(**kw)
