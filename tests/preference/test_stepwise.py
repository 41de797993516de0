"""Step-level preference objectives: MCTS-DPO, REFUEL, Direct Advantage PO, and the sequence log-prob sums.

DPO is computed inline from its formula -log sigma(beta (u_w - u_l)) (no dependency on the dpo module)."""
import math

import pytest
import torch
import torch.nn.functional as F

from tests.helpers import D, dpo_inline, grads, pair, rand
from workbench.preference.stepwise import (conservative_label_smoothing, direct_advantage_po, first_diverging_token,
                                           mcts_dpo, refuel, seq_logp, step_advantages)


# ---------------------------------------------------------------------------------------------- MCTS-DPO


def sibling_steps(seed, B=4, T=8):
    """Token log-probs of chosen/rejected sibling steps sharing a prefix of `k` tokens (same ids, same values)."""
    g = torch.Generator().manual_seed(seed)
    k = torch.tensor([2, 0, 3, 5])[:B]
    ids_c = torch.randint(0, 50, (B, T), generator=g)
    ids_r = torch.randint(50, 100, (B, T), generator=g)    # differ everywhere ...
    lc, lr = -torch.rand(B, T, generator=g, dtype=D) * 3, -torch.rand(B, T, generator=g, dtype=D) * 3
    rc, rr = -torch.rand(B, T, generator=g, dtype=D) * 3, -torch.rand(B, T, generator=g, dtype=D) * 3
    for b in range(B):                                     # ... except the shared prefix
        ids_r[b, :k[b]] = ids_c[b, :k[b]]
        lr[b, :k[b]], rr[b, :k[b]] = lc[b, :k[b]], rc[b, :k[b]]
    mask_c, mask_r = torch.ones(B, T, dtype=D), torch.ones(B, T, dtype=D)
    mask_r[:, -2:] = 0
    return ids_c, ids_r, lc.requires_grad_(True), lr.requires_grad_(True), rc, rr, mask_c, mask_r, k


@pytest.mark.covers("mcts-dpo")
def test_mcts_dpo_eps_zero_is_dpo_on_the_diverging_suffix_and_the_prefix_cancels():
    ids_c, ids_r, lc, lr, rc, rr, mc, mr, k = sibling_steps(0)
    start = first_diverging_token(ids_c, ids_r, mc, mr)
    assert torch.equal(start, k)
    sc, sr = seq_logp(lc, mc, start), seq_logp(lr, mr, start)
    src, srr = seq_logp(rc, mc, start), seq_logp(rr, mr, start)
    loss, m = mcts_dpo(sc, sr, src, srr, beta=0.1)
    ref = dpo_inline(sc, sr, src, srr, 0.1)
    assert loss.item() == pytest.approx(ref.item(), rel=1e-12) and m["mcts/label_smoothing"] == 0
    # whole-step sums give the same logit: the identical prefix contributes exactly zero
    full = (seq_logp(lc, mc) - seq_logp(rc, mc)) - (seq_logp(lr, mr) - seq_logp(rr, mr))
    suffix = (sc - src) - (sr - srr)
    assert torch.allclose(full, suffix, atol=1e-13)
    gc, gr = grads(loss, lc, lr)
    for b in range(4):
        assert torch.all(gc[b, :k[b]] == 0) and torch.all(gr[b, :k[b]] == 0)
        assert torch.all(gc[b, k[b]:] != 0)


@pytest.mark.covers("mcts-dpo")
def test_mcts_dpo_conservative_smoothing_from_q_values():
    qw = torch.tensor([0.0, 0.5, 2.0, 3.0], dtype=D)
    qb = torch.tensor([0.3, 0.2, 4.0, 0.5], dtype=D)
    eps = conservative_label_smoothing(qw, qb)
    expected = torch.clamp(1 - 1 / (1 + qw / qb.clamp(min=1)), max=0.5)
    assert torch.allclose(eps, expected, atol=1e-15)
    assert eps[0] == 0                                      # q_w = 0 => conf = 1 => eps = 0
    c, r, rc, rr = pair(16, B=4)
    loss, m = mcts_dpo(c, r, rc, rr, chosen_q=qw, rejected_q=qb)
    z = 0.1 * ((c - rc) - (r - rr))
    inline = (-(1 - eps) * F.logsigmoid(z) - eps * F.logsigmoid(-z)).mean()
    assert loss.item() == pytest.approx(inline.item(), rel=1e-12)
    assert m["mcts/label_smoothing"] == pytest.approx(float(eps.mean()))


@pytest.mark.covers("mcts-dpo")
def test_mcts_dpo_reference_bug_edge_cases_are_clamped_to_a_finite_eps():
    qb = torch.tensor([0.5, 3.0, 3.0, 0.2, 2.0], dtype=D)
    qw = torch.tensor([-0.5, -1.0, -3.0, -1.0, -10.0], dtype=D)   # q_w < 0; the pole q_w = -max(1, q_b); beyond
    buggy = conservative_label_smoothing(qw, qb, reference_bug=True)
    assert buggy[0] < 0 and buggy[1] < 0                          # conf > 1: negative smoothing in the reference
    assert buggy[2] == -math.inf and buggy[3] == -math.inf        # division by zero at the pole
    eps = conservative_label_smoothing(qw, qb)
    assert torch.all(torch.isfinite(eps)) and torch.all((eps >= 0) & (eps <= 0.5))
    assert eps.tolist() == [0.0, 0.0, 0.0, 0.0, 0.5]
    c, r, rc, rr = pair(17, B=5)
    loss, _ = mcts_dpo(c, r, rc, rr, chosen_q=qw, rejected_q=qb)
    assert math.isfinite(loss.item())
    with pytest.raises(ValueError, match="NaN/inf"):
        conservative_label_smoothing(torch.tensor([math.nan]), torch.tensor([1.0]))


@pytest.mark.covers("mcts-dpo")
def test_mcts_dpo_ipo_option_and_errors():
    c, r, rc, rr = pair(18)
    loss, _ = mcts_dpo(c, r, rc, rr, loss_type="ipo", beta=0.25)
    assert loss.item() == pytest.approx(((((c - rc) - (r - rr)) - 2.0) ** 2).mean().item(), rel=1e-12)
    with pytest.raises(ValueError, match="or neither"):
        mcts_dpo(c, r, rc, rr, chosen_q=rc)
    with pytest.raises(ValueError, match="no label smoothing"):
        mcts_dpo(c, r, rc, rr, loss_type="ipo", label_smoothing=0.1)


@pytest.mark.covers("mcts-dpo", "refuel")
def test_seq_logp_sums_from_start_and_rejects_empty_or_nan():
    logp = torch.tensor([[-1.0, -2.0, -3.0, -4.0], [-0.5, float("nan"), -1.5, 0.0]], dtype=D)
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 1, 1]], dtype=D)     # NaN sits at an uncounted position
    assert seq_logp(logp, mask).tolist() == [-6.0, -2.0]
    assert seq_logp(logp, mask, torch.tensor([1, 2])).tolist() == [-5.0, -1.5]
    assert seq_logp(logp, mask, 2).tolist() == [-3.0, -1.5]
    with pytest.raises(ValueError, match=r"rows \[0\] have no response token"):
        seq_logp(logp, mask, torch.tensor([3, 0]))
    assert seq_logp(logp, mask, torch.tensor([3, 0]), allow_empty=True)[0] == 0
    with pytest.raises(ValueError, match=r"NaN/inf token log-probs at counted positions in rows \[1\]"):
        seq_logp(logp, torch.ones_like(mask))
    with pytest.raises(ValueError, match="start indices"):
        seq_logp(logp, mask, 5)
    with pytest.raises(ValueError, match="integer"):
        seq_logp(logp, mask, torch.tensor([0.5, 1.0]))
    with pytest.raises(ValueError, match="same"):
        seq_logp(logp, mask[:, :3])
    same = torch.tensor([[1, 2, 3]])
    assert first_diverging_token(same, same).tolist() == [3]
    assert first_diverging_token(same, torch.tensor([[1, 2, 9]])).tolist() == [2]


# ---------------------------------------------------------------------------------------------- REFUEL


@pytest.mark.covers("refuel")
def test_refuel_matches_the_reference_code_and_depends_on_reward_differences_only():
    c, r, rc, rr = pair(19)
    qw, ql = rand(20, 6), rand(21, 6)
    for eta in (1.0, 1e3):
        loss, m = refuel(c, r, rc, rr, chosen_reward=qw, rejected_reward=ql, eta=eta)
        ratio = (c - rc) - (r - rr)
        ref = ((ratio - eta * (qw - ql)) ** 2).mean()         # setting_one/refuel.py reg_diff
        assert loss.item() == pytest.approx(ref.item(), rel=1e-12)
        shift = rand(22, 6, scale=7.0)
        shifted, _ = refuel(c, r, rc, rr, chosen_reward=qw + shift, rejected_reward=ql + shift, eta=eta)
        assert shifted.item() == pytest.approx(loss.item(), rel=1e-12)
        assert torch.allclose(grads(loss, c)[0], grads(shifted, c)[0], atol=1e-10)
    assert m["refuel/sign_align"] == float((ratio > 0).float().mean())


@pytest.mark.covers("refuel")
def test_refuel_equal_returns_keep_equal_log_ratios_optimal():
    rc, rr = rand(23, 6), rand(24, 6)
    offset = rand(25, 6)
    c, r = (rc + offset).requires_grad_(True), (rr + offset).requires_grad_(True)   # equal log-ratios
    q = rand(26, 6)
    loss, _ = refuel(c, r, rc, rr, chosen_reward=q, rejected_reward=q)
    assert loss.item() == pytest.approx(0.0, abs=1e-28)
    assert all(torch.all(g.abs() < 1e-14) for g in grads(loss, c, r))


@pytest.mark.covers("refuel")
def test_refuel_single_turn_is_rebel():
    g = torch.Generator().manual_seed(27)
    tok = [-torch.rand(4, 6, generator=g, dtype=D) for _ in range(4)]
    mask_w, mask_l = torch.ones(4, 6, dtype=D), torch.ones(4, 6, dtype=D)
    mask_l[:, 4:] = 0
    rw, rl = rand(28, 4), rand(29, 4)
    c, r = seq_logp(tok[0], mask_w, 0), seq_logp(tok[1], mask_l, 0)     # h = 0: the turn is the whole response
    rc, rr = seq_logp(tok[2], mask_w, 0), seq_logp(tok[3], mask_l, 0)
    eta = 2.0
    loss, _ = refuel(c, r, rc, rr, chosen_reward=rw, rejected_reward=rl, eta=eta)
    rebel = (((1 / eta) * ((c - rc) - (r - rr)) - (rw - rl)) ** 2).mean()    # REBEL's regression
    assert loss.item() == pytest.approx(eta ** 2 * rebel.item(), rel=1e-12)
    with pytest.raises(ValueError, match="chosen_reward and rejected_reward"):
        refuel(c, r, rc, rr)


# ---------------------------------------------------------------------------------------------- Direct Advantage PO


@pytest.mark.covers("direct-advantage-po")
def test_direct_advantage_po_optimum_is_log_ratio_a_over_beta():
    ref = -2 + rand(30, 8)
    values, next_values = torch.rand(8, dtype=D), torch.rand(8, dtype=D)
    A = step_advantages(values, next_values)
    beta = 0.2
    logp = (ref + A / beta).requires_grad_(True)
    loss, m = direct_advantage_po(logp, ref, A, beta=beta)
    assert loss.item() == pytest.approx(0.0, abs=1e-28)
    assert torch.all(grads(loss, logp)[0].abs() < 1e-14)
    assert m["dapo_step/sign_agreement"] == 1.0


@pytest.mark.covers("direct-advantage-po")
def test_direct_advantage_po_zero_advantage_keeps_the_reference_and_gradient_sign_follows_a():
    ref = -2 + rand(31, 6)
    logp = ref.clone().requires_grad_(True)
    loss, _ = direct_advantage_po(logp, ref, torch.zeros(6, dtype=D))
    assert loss.item() == 0 and torch.all(grads(loss, logp)[0] == 0)
    A = torch.tensor([1.0, -0.5, 0.3, -2.0, 0.0, 0.7], dtype=D)
    loss, _ = direct_advantage_po(logp, ref, A, beta=0.1)
    g = grads(loss, logp)[0]
    assert torch.allclose(g, -2 * 0.1 * A / 6, atol=1e-15)     # descent raises log pi where A > 0
    assert torch.equal(torch.sign(-g), torch.sign(A))


@pytest.mark.covers("direct-advantage-po")
def test_direct_advantage_po_step_mask_and_errors():
    logp, ref, A = rand(32, 2, 3).requires_grad_(True), rand(33, 2, 3), rand(34, 2, 3)
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]], dtype=D)
    loss, _ = direct_advantage_po(logp, ref, A, beta=0.5, mask=mask)
    expected = (((0.5 * (logp - ref) - A) ** 2) * mask).sum() / 3
    assert loss.item() == pytest.approx(expected.item(), rel=1e-12)
    with pytest.raises(ValueError, match="all zero"):
        direct_advantage_po(logp, ref, A, mask=torch.zeros(2, 3, dtype=D))
    with pytest.raises(ValueError, match="NaN/inf"):
        direct_advantage_po(logp, ref, torch.full((2, 3), math.nan, dtype=D))
