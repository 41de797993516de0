"""SAPO: the soft gate in place of the clip."""
import pytest
import torch

from tests.helpers import D, grad, random_batch, tokens
from workbench import ops
from workbench.objectives.soft import sapo


def sapo_token_grad(r, sign, **kw):
    logp, old, A, mask = tokens(r, sign)
    loss, m = sapo(logp, old, A, mask, agg="seq-mean-token-sum", **kw)
    return grad(loss * len(r), logp)[:, 0], m


@pytest.mark.covers("sapo")
def test_sapo_on_policy_gradient_is_minus_advantage():
    logp, old, A, mask = tokens([1.0, 1.0, 1.0, 1.0], [2.0, -1.0, 0.5, -3.0])
    loss, m = sapo(logp, logp.detach(), A, mask, agg="seq-mean-token-sum")
    assert torch.allclose(grad(loss * 4, logp), -A, atol=1e-15)
    assert m["sapo/gate_weight"] == pytest.approx(1.0)
    assert not any(k.startswith("clip/") for k in m)


@pytest.mark.covers("sapo")
def test_sapo_gradient_matches_formula_and_vanishes_far_from_one():
    r = torch.tensor([0.05, 0.5, 0.9, 1.0, 1.3, 2.0, 5.0, 20.0, 60.0], dtype=D)
    for sign, tau in ((1.0, 1.0), (-1.0, 1.05)):
        g, _ = sapo_token_grad(r, sign)
        s = torch.sigmoid(tau * (r - 1))
        assert torch.allclose(g, -sign * r * 4 * s * (1 - s), rtol=1e-12, atol=1e-300)
        assert abs(g[-1]) < 1e-20 and abs(g[0]) < 0.05
        right = g[r >= 2].abs()
        assert torch.all(right[1:] < right[:-1])  # decays monotonically on the far side


@pytest.mark.covers("sapo")
def test_sapo_small_tau_is_the_unclipped_surrogate():
    r = torch.tensor([0.3, 0.8, 1.0, 1.5, 3.0], dtype=D)
    tau = 1e-4
    for sign in (1.0, -1.0):
        logp, old, A, mask = tokens(r, sign)
        per = [sapo(logp[i:i + 1], old[i:i + 1], A[i:i + 1], mask[i:i + 1], tau_pos=tau, tau_neg=tau)[0].item()
               for i in range(len(r))]
        f = torch.tensor(per, dtype=D) / -sign  # f_tau(r)
        assert torch.allclose(f - f[2], r - 1, atol=1e-8)
        g, _ = sapo_token_grad(r, sign, tau_pos=tau, tau_neg=tau)
        assert torch.allclose(g, -sign * r, rtol=1e-7)  # d(-rA)/dlogp


@pytest.mark.covers("sapo")
def test_sapo_accepts_any_aggregation_and_rejects_bad_tau():
    logp, old, A, mask = random_batch(7)
    for agg in ops.AGG_MODES[:3]:
        loss, _ = sapo(logp, old, A, mask, agg=agg)
        assert torch.isfinite(loss)
    with pytest.raises(ValueError, match="tau"):
        sapo(logp, old, A, mask, tau_neg=0.0)
