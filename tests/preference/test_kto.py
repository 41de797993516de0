"""KTO: known values, the detached non-negative baseline, bounds, bad input. Float64 throughout."""
import pytest
import torch

from tests.helpers import D, pairs
from workbench.preference.kto import kto, kto_baseline, kto_weight_ranges

pytestmark = pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad")


def kto_case(seed=9, B=10):
    g = torch.Generator().manual_seed(seed)
    logp = (-20 * torch.rand(B, generator=g, dtype=D)).requires_grad_(True)
    ref = logp.detach() + torch.randn(B, generator=g, dtype=D) * 3
    label = torch.rand(B, generator=g) < 0.6
    label[0], label[1] = True, False
    kl_logp = (-20 * torch.rand(B, generator=g, dtype=D)).requires_grad_(True)
    kl_ref = kl_logp.detach() - torch.rand(B, generator=g, dtype=D) * 2  # mean KL > 0
    return logp, ref, label, kl_logp, kl_ref


@pytest.mark.covers("kto")
def test_kto_known_value_and_baseline_detached_nonnegative():
    logp, ref, label, kl_logp, kl_ref = kto_case()
    beta, wd, wu = 0.2, 1.5, 0.7
    loss, m = kto(logp=logp, ref_logp=ref, label=label, kl_logp=kl_logp, kl_ref_logp=kl_ref, beta=beta,
                  desirable_weight=wd, undesirable_weight=wu)
    z = (kl_logp - kl_ref).mean().detach()
    assert float(z) > 0 and m["kl"] == pytest.approx(float(z))
    u = logp - ref
    per = torch.where(label, wd * (1 - torch.sigmoid(beta * (u - z))), wu * (1 - torch.sigmoid(beta * (z - u))))
    torch.testing.assert_close(loss, per.mean())
    assert torch.autograd.grad(loss, kl_logp, allow_unused=True)[0] is None  # z is detached
    # clamped at 0 when the mismatched-pair KL estimate is negative
    assert float(kto_baseline(kl_ref, kl_logp.detach())) == 0.0
    l_neg, m_neg = kto(logp=logp, ref_logp=ref, label=label, kl_logp=kl_ref, kl_ref_logp=kl_logp.detach())
    assert m_neg["kl"] == 0.0
    torch.testing.assert_close(l_neg, kto(logp=logp, ref_logp=ref, label=label)[0])  # z = 0 path
    torch.testing.assert_close(kto(logp=logp, ref_logp=ref, label=label, z_ref=z)[0],
                               kto(logp=logp, ref_logp=ref, label=label, kl_logp=kl_logp, kl_ref_logp=kl_ref)[0])
    assert m["rewards/chosen"] == pytest.approx(float(beta * u[label].mean()))
    assert m["rewards/margins"] == pytest.approx(m["rewards/chosen"] - m["rewards/rejected"])


@pytest.mark.covers("kto")
def test_kto_losses_bounded_and_monotone():
    u = torch.linspace(-30, 30, 13, dtype=D)
    z0 = torch.zeros_like(u)
    des = torch.stack([kto(logp=x.reshape(1), ref_logp=z0[:1], label=[True], z_ref=0.5)[0] for x in u])
    und = torch.stack([kto(logp=x.reshape(1), ref_logp=z0[:1], label=[False], z_ref=0.5)[0] for x in u])
    assert bool(((des > 0) & (des < 1) & (und > 0) & (und < 1)).all())
    assert bool((des.diff() < 0).all()) and bool((und.diff() > 0).all())
    # paired positional form = unpaired concatenation (chosen desirable, rejected undesirable)
    c, r, rc, rr = pairs(10)
    l_p, m_p = kto(c, r, rc, rr, z_ref=0.3)
    l_u, _ = kto(logp=torch.cat([c, r]), ref_logp=torch.cat([rc, rr]), label=[1] * 8 + [0] * 8, z_ref=0.3)
    torch.testing.assert_close(l_p, l_u)
    assert "rewards/accuracies" in m_p and m_p["kl"] == pytest.approx(0.3)


@pytest.mark.covers("kto")
def test_kto_bad_input_and_weight_ranges():
    logp, ref, label, kl_logp, kl_ref = kto_case()
    with pytest.raises(ValueError, match="EITHER"):
        kto(logp[:2], logp[:2], logp[:2], logp[:2], logp=logp, ref_logp=ref, label=label)
    with pytest.raises(ValueError, match="label has shape"):
        kto(logp=logp, ref_logp=ref, label=label[:-1])
    with pytest.raises(ValueError, match="0/1"):
        kto(logp=logp, ref_logp=ref, label=torch.full(label.shape, 2))
    with pytest.raises(ValueError, match="shape"):
        kto(logp=logp, ref_logp=ref[:-1], label=label)
    with pytest.raises(ValueError, match="one source"):
        kto(logp=logp, ref_logp=ref, label=label, kl_logp=kl_logp, kl_ref_logp=kl_ref, z_ref=0.1)
    with pytest.raises(ValueError, match="NaN"):
        kto(logp=logp, ref_logp=ref, label=label, kl_logp=kl_logp, kl_ref_logp=kl_ref * float("nan"))
    e = torch.zeros(0, dtype=D)
    with pytest.raises(ValueError, match="empty"):
        kto(logp=e, ref_logp=e, label=e.bool())
    # TRL's class-imbalance range (KTO eq. 8): 3 desirable vs 1 undesirable
    assert kto_weight_ranges(10, 10)["in_range"]
    with pytest.warns(UserWarning, match="EITHER"):
        r = kto_weight_ranges(30, 10)
    assert r["desirable_weight"] == (0.33, 0.44) and r["undesirable_weight"] == (2.26, 3.0)
    assert kto_weight_ranges(30, 10, undesirable_weight=2.5)["in_range"]
