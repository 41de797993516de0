"""Agreement with the CAPO reference (luckeciano/stable-pg-llm @ 933fe01, transcribed in formulas_capo.py): the
per-token predicted KL and objective shift, the token masks, and the masked loss with its gradient; float64.

Our preconditioner reads the optimizer's moments of the loss gradient (exp_avg, exp_avg_sq, a dense [V, H] each); the
reference's sparse Adam model keeps ascent-direction moments per token id (a dict), so the same state is
m[id] = -exp_avg[id], v[id] = exp_avg_sq[id], and ids absent from the dict are zero rows.
"""
from __future__ import annotations

import pytest
import torch

from tests.helpers import D, anchor_mask, assert_agree, seeded
from tests.anchors import formulas_capo as ref
from workbench import ops
from workbench.context import Head
from workbench.objectives.capo import capo, capo_keep, predict_token_updates

B, T, V, H, K = 4, 6, 20, 5, 8
BETAS, EPS = (0.9, 0.999), 1e-8
CLOSE = dict(rtol=1e-9, atol=0.0)  # the predictions are ~1e-4; both sides float64


def case(seed, step=3, lr=0.05):
    """Random hidden states, head, actions (half of them outside the top K), per-sequence advantages, and the same
    Adam state in both conventions (14 of the 20 ids have moments)."""
    g = seeded(seed)
    mask = anchor_mask(B, T, g)
    hidden = torch.randn(B, T, H, generator=g, dtype=D)
    weight = 2 * torch.randn(V, H, generator=g, dtype=D)
    top_ids = (hidden @ weight.T).topk(K, dim=-1).indices
    actions = torch.where(torch.rand(B, T, generator=g) < 0.5, top_ids[..., 0 if seed % 2 else 3],
                          torch.randint(V, (B, T), generator=g))
    A = torch.randn(B, generator=g, dtype=D)
    exp_avg = 0.3 * torch.randn(V, H, generator=g, dtype=D)
    exp_avg_sq = 0.2 * torch.rand(V, H, generator=g, dtype=D)
    absent = torch.randperm(V, generator=g)[:6]
    exp_avg[absent], exp_avg_sq[absent] = 0.0, 0.0
    m = {i: -exp_avg[i] for i in range(V) if i not in absent.tolist()}
    v = {i: exp_avg_sq[i] for i in m}
    head = Head(hidden=hidden, weight=weight, bias=None, trained=True, lr=lr, betas=BETAS, eps=EPS, temperature=1.0,
                exp_avg=exp_avg if step else None, exp_avg_sq=exp_avg_sq if step else None, step=step)
    return head, actions, A, mask, (m, v) if step else ({}, {})


def theirs(head, actions, A, moments, step):
    _, probs, top_k_token_ids = ref._compute_entropy(head.hidden @ head.weight.T, k=K)
    one_hot = ref.action_one_hot(actions, top_k_token_ids)
    return ref.capo_token_predictions(head.hidden, probs, one_hot, A, top_k_token_ids, *moments, step, head.lr,
                                      *BETAS, EPS)


def ours(head, actions, A, mask, reference_bug=False):
    return predict_token_updates(head, actions, A[:, None].expand(B, T) * mask, mask > 0, top_k=K,
                                 reference_bug=reference_bug)


@pytest.mark.covers("capo")
@pytest.mark.parametrize("seed", range(4))
def test_predicted_kl_and_shift_match_the_reference(seed):
    head, actions, A, mask, moments = case(seed)
    full_update_term, approx_kl = theirs(head, actions, A, moments, head.step)
    kl, shift = ours(head, actions, A, mask)
    valid = mask > 0
    torch.testing.assert_close(kl[valid], approx_kl[valid], **CLOSE)
    torch.testing.assert_close(shift[valid], full_update_term[valid], **CLOSE)
    assert bool((kl == 0)[~valid].all()) and bool((approx_kl[valid] > 0).all())


@pytest.mark.covers("capo")
def test_first_step_identity_preconditioner_is_reproduced_by_reference_bug():
    """An empty moment table: the reference returns the raw gradient (SGD); ours predicts Adam's first step unless
    reference_bug=True."""
    head, actions, A, mask, moments = case(5, step=0)
    full_update_term, approx_kl = theirs(head, actions, A, moments, 0)
    valid = mask > 0
    kl_bug, shift_bug = ours(head, actions, A, mask, reference_bug=True)
    torch.testing.assert_close(kl_bug[valid], approx_kl[valid], **CLOSE)
    torch.testing.assert_close(shift_bug[valid], full_update_term[valid], **CLOSE)
    kl, shift = ours(head, actions, A, mask)
    assert not torch.allclose(kl[valid], approx_kl[valid], rtol=1e-3)
    assert not torch.allclose(shift[valid], full_update_term[valid], rtol=1e-3)


@pytest.mark.covers("capo")
@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("seed", range(3))
def test_token_masks_match_the_reference(seed, symmetric):
    head, actions, A, mask, moments = case(seed)
    full_update_term, approx_kl = theirs(head, actions, A, moments, head.step)
    valid = mask > 0
    tau_f, tau_h = float(approx_kl[valid].median()), float(full_update_term[valid].abs().median())
    expected = ref.updated_mask(full_update_term, approx_kl, mask, tau_h, tau_f, symmetric)
    kl, shift = ours(head, actions, A, mask)
    fisher_ok, hessian_ok = capo_keep(kl, shift, tau_fisher=tau_f, tau_hessian=tau_h, symmetric=symmetric)
    got = mask * (fisher_ok & hessian_ok).to(D)
    assert torch.equal(got, expected.to(D))
    assert 0 < float(got.sum()) < float(mask.sum())  # the thresholds split the tokens


@pytest.mark.covers("capo")
@pytest.mark.parametrize("seed", range(3))
def test_masked_loss_and_gradient_match_the_reference(seed):
    head, actions, A, mask, moments = case(seed)
    full_update_term, approx_kl = theirs(head, actions, A, moments, head.step)
    valid = mask > 0
    tau_f, tau_h = float(approx_kl[valid].median()), float(full_update_term[valid].abs().median())
    g = seeded(seed + 100)
    old = -torch.rand(B, T, generator=g, dtype=D) * 2
    logp = (old + 0.3 * torch.randn(B, T, generator=g, dtype=D)).requires_grad_(True)
    loss, metrics = capo(logp, old, A[:, None].expand(B, T) * mask, mask, head=head, response_ids=actions,
                         agg="seq-mean-token-mean", denom=ops.Denominators.of(mask), tau_fisher=tau_f,
                         tau_hessian=tau_h, top_k=K)
    expected = ref.final_loss(logp, old, A, mask, ref.updated_mask(full_update_term, approx_kl, mask, tau_h, tau_f))
    assert_agree(loss, expected, leaf=logp)
    assert 0 < metrics["capo/masked_frac"] < 1
