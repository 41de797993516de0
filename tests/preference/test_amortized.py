"""BRAIn (posterior-weighted samples) and SPO preference degrees (degraded copies).

DPO is computed inline from its formula -log sigma(beta (u_w - u_l)) (no dependency on the dpo module)."""
import math

import pytest
import torch
import torch.nn.functional as F

from tests.helpers import D, dpo_inline, grads, pair, rand
from workbench.preference.amortized import brain, brain_weights, degrade_response, degree_labels, spo_prefdeg


# ---------------------------------------------------------------------------------------------- BRAIn


def posterior_logp(ref, rewards, beta=1.0):
    return ref + F.logsigmoid((rewards - rewards.mean(-1, keepdim=True)) / beta)


@pytest.mark.covers("brain")
def test_brain_zero_gradient_when_the_policy_is_the_posterior_on_the_samples():
    B, n = 3, 4
    ref, rewards, q = -5 + rand(40, B, n), rand(41, B, n), -5 + rand(42, B, n)
    logp = (posterior_logp(ref, rewards) + rand(43, B, 1)).requires_grad_(True)   # + a per-prompt constant
    loss, m = brain(logp, None, ref, None, rewards=rewards, proposal_logp=q)
    assert loss.item() == pytest.approx(0.0, abs=1e-14)
    assert torch.all(grads(loss, logp)[0].abs() < 1e-14)
    assert m["brain/alpha_ess"] <= n


@pytest.mark.covers("brain")
def test_brain_proposal_equal_to_the_posterior_gives_uniform_weights():
    ref, rewards = -5 + rand(44, 3, 5), rand(45, 3, 5)
    q = posterior_logp(ref, rewards) + 2.0
    alpha = brain_weights(ref, rewards, q)
    assert torch.allclose(alpha, torch.full_like(alpha, 0.2), atol=1e-15)


@pytest.mark.covers("brain")
def test_brain_gradient_is_beta_minus_alpha():
    B, n = 2, 3
    logp, ref, rewards = (-5 + rand(46, B, n)).requires_grad_(True), -5 + rand(47, B, n), rand(48, B, n)
    q = -5 + rand(49, B, n)
    loss, _ = brain(logp, None, ref, None, rewards=rewards, proposal_logp=q, beta=0.5)
    alpha = brain_weights(ref, rewards, q, beta=0.5)
    beta_w = torch.softmax(logp.detach() - q, -1)
    assert torch.allclose(grads(loss, logp)[0], (beta_w - alpha) / B, atol=1e-15)


@pytest.mark.covers("brain")
def test_brain_two_samples_follow_dpo_and_hard_weights_with_q_ref_are_dpo():
    c, r, rc, rr = pair(50)
    rw, rl = torch.full((6,), 1.0, dtype=D), torch.full((6,), -1.0, dtype=D)   # BT reward: chosen better
    rewards = torch.stack([rw, rl], -1)
    # direction: same sign as DPO's at pi = pi_ref
    c0, r0 = rc.clone().requires_grad_(True), rr.clone().requires_grad_(True)
    loss, _ = brain(c0, r0, rc, rr, rewards=rewards, proposal_logp=torch.stack([rc, rr], -1))
    dpo = dpo_inline(c0, r0, rc, rr, 0.1)
    for a, b in zip(grads(loss, c0, r0), grads(dpo, c0, r0)):
        assert torch.equal(torch.sign(a), torch.sign(b)) and torch.all(a != 0)
    # DPO-sft limit: argmax weights, two samples, q = pi_ref => -log sigma(u_w - u_l) (DPO at beta = 1)
    hard, m = brain(c, r, rc, rr, rewards=rewards, proposal_logp=torch.stack([rc, rr], -1), hard=True)
    ref = dpo_inline(c, r, rc, rr, 1.0)
    assert hard.item() == pytest.approx(ref.item(), rel=1e-12)
    for a, b in zip(grads(hard, c, r), grads(ref, c, r)):
        assert torch.allclose(a, b, atol=1e-14)
    assert m["rewards/chosen"] == pytest.approx(float((c - rc).detach().mean()), rel=1e-12)


@pytest.mark.covers("brain")
def test_brain_errors():
    logp, ref = rand(51, 2, 3), rand(52, 2, 3)
    with pytest.raises(ValueError, match="needs rewards"):
        brain(logp, None, ref, None)
    with pytest.raises(ValueError, match="at least 2"):
        brain(logp[:, :1], None, ref[:, :1], None, rewards=ref[:, :1])
    with pytest.raises(ValueError, match="NaN/inf"):
        brain(logp, None, ref, None, rewards=torch.full((2, 3), math.nan, dtype=D))
    with pytest.raises(ValueError, match="shape"):
        brain(logp, None, ref, None, rewards=ref[:, :2])


# ---------------------------------------------------------------------------------------------- SPO (degrees)


@pytest.mark.covers("spo-prefdeg")
def test_spo_prefdeg_lambda_zero_is_the_base_loss():
    c, r, rc, rr = pair(60)
    deg, ref_deg = (-6 + rand(61, 6, 2)).requires_grad_(True), -6 + rand(62, 6, 2)
    for kw in ({}, {"degraded_logp": deg, "ref_degraded_logp": ref_deg}):
        loss, _ = spo_prefdeg(c, r, rc, rr, lam=0.0, **kw)
        ref = dpo_inline(c, r, rc, rr, 0.1)
        assert loss.item() == pytest.approx(ref.item(), rel=1e-12)
        assert torch.allclose(grads(loss, c)[0], grads(ref, c)[0], atol=1e-14)
    ipo, _ = spo_prefdeg(c, r, rc, rr, lam=0.0, base="ipo", beta=0.5)
    assert ipo.item() == pytest.approx(((((c - rc) - (r - rr)) - 1.0) ** 2).mean().item(), rel=1e-12)


@pytest.mark.covers("spo-prefdeg")
def test_spo_prefdeg_auxiliary_ranks_every_degree_pair():
    c, r, rc, rr = pair(63)
    deg, ref_deg = -6 + rand(64, 6, 2), -6 + rand(65, 6, 2)
    loss, m = spo_prefdeg(c, r, rc, rr, degraded_logp=deg, ref_degraded_logp=ref_deg, lam=0.1)
    u = torch.stack([c - rc, deg[:, 0] - ref_deg[:, 0], deg[:, 1] - ref_deg[:, 1]], -1)   # degrees 0, 1/3, 2/3
    aux = sum(-F.logsigmoid(0.1 * (u[:, i] - u[:, j])) for i, j in ((0, 1), (0, 2), (1, 2))).mean()
    assert loss.item() == pytest.approx((dpo_inline(c, r, rc, rr, 0.1) + 0.1 * aux).item(), rel=1e-12)
    assert m["spo/aux_loss"] == pytest.approx(aux.item(), rel=1e-12)
    # degrees given out of order: the pairs follow the degrees, not the columns
    swapped, _ = spo_prefdeg(c, r, rc, rr, degraded_logp=deg.flip(-1), ref_degraded_logp=ref_deg.flip(-1),
                             degrees=torch.tensor([2 / 3, 1 / 3], dtype=D))
    assert swapped.item() == pytest.approx(loss.item(), rel=1e-12)


@pytest.mark.covers("spo-prefdeg")
def test_spo_prefdeg_degree_labels_are_monotone_in_the_removal_ratio():
    ids = torch.arange(20)
    key = torch.zeros(20, dtype=torch.bool)
    key[[1, 3, 4, 8, 9, 12, 15, 17, 18]] = True
    fractions = [0.0, 1 / 3, 2 / 3, 1.0]
    copies = degrade_response(ids, key, fractions, generator=torch.Generator().manual_seed(0))
    removed = [set(ids.tolist()) - set(cp.tolist()) for cp in copies]
    assert [len(s) for s in removed] == [0, 3, 6, 9]
    assert all(removed[i] <= removed[i + 1] for i in range(3))           # nested: more removal, superset
    assert all(s <= set(ids[key].tolist()) for s in removed)             # only key content is removed
    assert torch.equal(copies[0], ids)
    labels = degree_labels(torch.tensor(fractions))
    assert labels.tolist() == [3, 2, 1, 0]
    assert degree_labels(torch.tensor([0.5, 0.0, 0.5])).tolist() == [0, 2, 0]
    with pytest.raises(ValueError, match="no key token"):
        degrade_response(ids, torch.zeros(20, dtype=torch.bool), [0.5])


@pytest.mark.covers("spo-prefdeg")
def test_spo_prefdeg_auxiliary_has_no_gradient_when_levels_are_ranked_by_a_wide_margin():
    rc, rr = -5 + rand(66, 4), -5 + rand(67, 4)
    c, r = rc.clone().requires_grad_(True), rr.clone()
    ref_deg = -5 + rand(68, 4, 2)
    deg = (ref_deg - torch.tensor([500.0, 1000.0], dtype=D)).requires_grad_(True)   # u: 0 > -500 > -1000
    loss, m = spo_prefdeg(c, r, rc, rr, degraded_logp=deg, ref_degraded_logp=ref_deg, lam=1.0)
    assert m["spo/aux_loss"] < 1e-20 and m["spo/degree_accuracy"] == 1.0
    assert torch.all(grads(loss, deg)[0].abs() < 1e-20)


@pytest.mark.covers("spo-prefdeg")
def test_spo_prefdeg_errors():
    c, r, rc, rr = pair(69)
    with pytest.raises(ValueError, match="needs degraded_logp"):
        spo_prefdeg(c, r, rc, rr)
    with pytest.raises(ValueError, match="both"):
        spo_prefdeg(c, r, rc, rr, degraded_logp=rand(70, 6, 2))
    with pytest.raises(ValueError, match="removal fractions"):
        spo_prefdeg(c, r, rc, rr, degraded_logp=rand(71, 6, 2), ref_degraded_logp=rand(72, 6, 2),
                    degrees=torch.tensor([0.5, 1.5], dtype=D))
    with pytest.raises(ValueError, match="NaN/inf"):
        spo_prefdeg(c, r, rc, rr, degraded_logp=torch.full((6, 2), math.nan, dtype=D),
                    ref_degraded_logp=rand(73, 6, 2))
