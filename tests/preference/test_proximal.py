"""Proximal and reference-moving preference objectives: P3O, APO (accelerated), SALSA (soup reference).

DPO is computed inline from its formula -log sigma(beta (u_w - u_l)) (no dependency on the dpo module)."""
import pytest
import torch

from tests.helpers import D, dpo_inline, grads, pair, rand
from workbench.preference.proximal import (apo_accelerated, extrapolated_reference, interpolated_state_dict, p3o, salsa,
                                           soup_model, soup_state_dict)


# ---------------------------------------------------------------------------------------------- P3O


def p3o_inputs(seed, B=5, scale=0.3):
    c, r, rc, rr = pair(seed, B)
    old_c, old_r = c.detach() + rand(seed + 7, B, scale=scale), r.detach() + rand(seed + 8, B, scale=scale)
    return c, r, rc, rr, old_c, old_r, rand(seed + 9, B), rand(seed + 10, B)


@pytest.mark.covers("p3o")
@pytest.mark.parametrize("variant", ["separate", "joint"])
def test_p3o_gradient_invariant_to_per_prompt_reward_shift(variant):
    c, r, rc, rr, oc, orr, r1, r2 = p3o_inputs(0)
    shift = rand(99, 5, scale=10.0)
    kw = dict(old_chosen_logp=oc, old_rejected_logp=orr, variant=variant)
    l1, _ = p3o(c, r, rc, rr, chosen_reward=r1, rejected_reward=r2, **kw)
    l2, _ = p3o(c, r, rc, rr, chosen_reward=r1 + shift, rejected_reward=r2 + shift, **kw)
    assert l1.item() == pytest.approx(l2.item(), rel=1e-12)
    for a, b in zip(grads(l1, c, r), grads(l2, c, r)):
        assert torch.allclose(a, b, atol=1e-14)


@pytest.mark.covers("p3o")
@pytest.mark.parametrize("variant", ["separate", "joint"])
def test_p3o_swapping_the_two_responses_leaves_the_loss_unchanged(variant):
    c, r, rc, rr, oc, orr, r1, r2 = p3o_inputs(1, scale=0.5)      # some ratios outside the clip band
    l12, _ = p3o(c, r, rc, rr, chosen_reward=r1, rejected_reward=r2, old_chosen_logp=oc, old_rejected_logp=orr,
                 variant=variant)
    l21, _ = p3o(r, c, rr, rc, chosen_reward=r2, rejected_reward=r1, old_chosen_logp=orr, old_rejected_logp=oc,
                 variant=variant)
    assert l12.item() == pytest.approx(l21.item(), rel=1e-12)


@pytest.mark.covers("p3o")
@pytest.mark.parametrize("variant", ["separate", "joint"])
def test_p3o_at_ratio_one_is_the_pairwise_policy_gradient(variant):
    c, r, rc, rr, _, _, r1, r2 = p3o_inputs(2)
    beta = 0.1
    loss, m = p3o(c, r, rc, rr, chosen_reward=r1, rejected_reward=r2, beta=beta, variant=variant)  # old = current
    A = ((r1 - beta * (c.detach() - rc)) - (r2 - beta * (r.detach() - rr))) / 2
    gc, gr = grads(loss, c, r)
    assert torch.allclose(gc, -A / 5, atol=1e-14) and torch.allclose(gr, A / 5, atol=1e-14)
    assert m["clip/region"] == 0 and m["clip/out_of_band"] == 0


@pytest.mark.covers("p3o")
def test_p3o_separate_clips_each_response_like_ppo():
    c = torch.tensor([0.5], dtype=D).requires_grad_(True)    # log rho_1 = 0.5: rho = 1.65 > 1.2
    r = torch.tensor([0.0], dtype=D).requires_grad_(True)    # rho_2 = 1
    zero = torch.zeros(1, dtype=D)
    loss, m = p3o(c, r, zero, zero, chosen_reward=torch.tensor([2.0], dtype=D), rejected_reward=zero,
                  old_chosen_logp=zero, old_rejected_logp=zero, beta=0.0)
    gc, gr = grads(loss, c, r)
    assert gc.item() == 0 and gr.item() == pytest.approx(1.0)   # A = 1: y1 clipped, y2 gets -(-A) rho = +1
    assert loss.item() == pytest.approx(-(1.2 * 1.0) + 1.0)
    assert m["clip/region"] == 0.5


@pytest.mark.covers("p3o")
def test_p3o_errors():
    c, r, rc, rr = pair(3)
    with pytest.raises(ValueError, match="chosen_reward and rejected_reward"):
        p3o(c, r, rc, rr)
    with pytest.raises(ValueError, match="unknown variant"):
        p3o(c, r, rc, rr, chosen_reward=rc, rejected_reward=rr, variant="both")
    with pytest.raises(ValueError, match="NaN/inf"):
        p3o(c, r, rc, rr, chosen_reward=torch.full((6,), float("nan"), dtype=D), rejected_reward=rr)


# ---------------------------------------------------------------------------------------------- APO


@pytest.mark.covers("apo-accelerated")
def test_apo_alpha_zero_and_first_iteration_are_iterative_dpo():
    c, r, rc, rr = pair(4)
    prev_c, prev_r = rc + rand(5, 6), rr + rand(6, 6)
    for kw in ({"alpha": 0.0, "prev_ref_chosen_logp": prev_c, "prev_ref_rejected_logp": prev_r}, {}):
        loss, _ = apo_accelerated(c, r, rc, rr, **kw)
        ref = dpo_inline(c, r, rc, rr, 0.1)
        assert loss.item() == pytest.approx(ref.item(), rel=1e-12)
        assert torch.allclose(grads(loss, c)[0], grads(ref, c)[0], atol=1e-14)


@pytest.mark.covers("apo-accelerated")
def test_apo_extrapolated_reference_is_the_affine_combination():
    t, t1 = rand(7, 6), rand(8, 6)
    for alpha in (0.0, 0.3, 0.6):
        assert torch.allclose(extrapolated_reference(t, t1, alpha), (1 + alpha) * t - alpha * t1, atol=1e-15)
    c, r, rc, rr = pair(9)
    pc, pr = rc - 1.0, rr + 0.5
    loss, m = apo_accelerated(c, r, rc, rr, alpha=0.3, prev_ref_chosen_logp=pc, prev_ref_rejected_logp=pr)
    expected = dpo_inline(c, r, 1.3 * rc - 0.3 * pc, 1.3 * rr - 0.3 * pr, 0.1)
    assert loss.item() == pytest.approx(expected.item(), rel=1e-12)
    assert m["apo/ref_shift"] == pytest.approx(0.3 * 0.75, rel=1e-12)
    ipo, _ = apo_accelerated(c, r, rc, rr, alpha=0.3, prev_ref_chosen_logp=pc, prev_ref_rejected_logp=pr,
                             loss_type="ipo")
    z = (c - 1.3 * rc + 0.3 * pc) - (r - 1.3 * rr + 0.3 * pr)
    assert ipo.item() == pytest.approx(((z - 5.0) ** 2).mean().item(), rel=1e-12)


@pytest.mark.covers("apo-accelerated")
def test_apo_loss_unchanged_by_a_per_prompt_constant_in_either_reference():
    c, r, rc, rr = pair(10)
    pc, pr = rc + rand(11, 6), rr + rand(12, 6)
    cx, dx = rand(13, 6, scale=5.0), rand(14, 6, scale=5.0)
    l1, _ = apo_accelerated(c, r, rc, rr, prev_ref_chosen_logp=pc, prev_ref_rejected_logp=pr)
    l2, _ = apo_accelerated(c, r, rc + cx, rr + cx, prev_ref_chosen_logp=pc + dx, prev_ref_rejected_logp=pr + dx)
    assert l1.item() == pytest.approx(l2.item(), rel=1e-12)
    assert torch.allclose(grads(l1, c)[0], grads(l2, c)[0], atol=1e-13)


@pytest.mark.covers("apo-accelerated")
def test_apo_errors():
    c, r, rc, rr = pair(15)
    with pytest.raises(ValueError, match="or neither"):
        apo_accelerated(c, r, rc, rr, prev_ref_chosen_logp=rc)
    with pytest.raises(ValueError, match="alpha"):
        extrapolated_reference(rc, rr, -0.1)
    with pytest.raises(ValueError, match="shape"):
        extrapolated_reference(rc, rr[:3], 0.3)


# ---------------------------------------------------------------------------------------------- SALSA


def tiny_lm(seed, vocab=7, dim=4):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Embedding(vocab, dim), torch.nn.Linear(dim, vocab)).to(D)
    model.register_buffer("ids", torch.arange(3))
    return model


def token_logp(model, tokens):
    """log pi(tokens[t+1] | tokens[t]) for a bigram 'LM', [B, T-1]."""
    logits = model(tokens[:, :-1])
    return torch.log_softmax(logits, -1).gather(-1, tokens[:, 1:, None])[..., 0]


@pytest.mark.covers("salsa")
def test_salsa_soup_of_identical_checkpoints_is_that_checkpoint():
    m = tiny_lm(0)
    sd = m.state_dict()
    soup = soup_state_dict([sd, sd, sd])
    assert all(torch.equal(soup[k], sd[k]) for k in sd)
    soup2 = soup_state_dict([sd, sd], [0.25, 0.75])
    assert all(torch.allclose(soup2[k].to(D), sd[k].to(D), atol=1e-15) for k in sd)


@pytest.mark.covers("salsa")
def test_salsa_soup_is_the_weighted_average_and_alpha_one_is_the_sft_reference():
    a, b = tiny_lm(1).state_dict(), tiny_lm(2).state_dict()
    half = soup_state_dict([a, b])
    assert all(torch.allclose(half[k], (a[k] + b[k]) / 2, atol=1e-15) for k in a if a[k].is_floating_point())
    assert torch.equal(half["ids"], a["ids"])
    one = interpolated_state_dict(a, b, alpha=1.0)
    assert all(torch.equal(one[k], a[k]) for k in a)
    w = interpolated_state_dict(a, b, alpha=0.3)
    assert torch.allclose(w["1.weight"], 0.3 * a["1.weight"] + 0.7 * b["1.weight"], atol=1e-15)
    with pytest.raises(ValueError, match="sum to 1"):
        soup_state_dict([a, b], [0.5, 0.6])
    with pytest.raises(ValueError, match="alpha must lie"):
        interpolated_state_dict(a, b, alpha=1.5)
    with pytest.raises(ValueError, match="different keys"):
        soup_state_dict([a, {k: v for k, v in b.items() if k != "ids"}])
    c = dict(b)
    c["ids"] = torch.arange(1, 4)
    with pytest.raises(ValueError, match="non-floating"):
        soup_state_dict([a, c])


@pytest.mark.covers("salsa")
def test_salsa_kl_to_the_soup_is_zero_when_the_policy_starts_at_the_soup():
    sft_a, sft_b = tiny_lm(3), tiny_lm(4)
    ref = soup_model([sft_a, sft_b])
    policy = soup_model([sft_a, sft_b]).requires_grad_(True).train()
    tokens = torch.randint(0, 7, (3, 6), generator=torch.Generator().manual_seed(0))
    mask = torch.ones(3, 5, dtype=D)
    mask[0, 3:] = 0
    logp, ref_logp = token_logp(policy, tokens), token_logp(ref, tokens)
    penalty, m = salsa(logp, ref_logp, mask)
    assert torch.all(penalty == 0) and m["kl/soup"] == 0
    loss, m = salsa(logp, ref_logp, mask, placement="loss", estimator="k3")
    assert loss.item() == 0 and m["kl/soup"] == 0
    # against a single SFT model the KL is not zero
    penalty_a, m_a = salsa(logp, token_logp(sft_a, tokens), mask, beta=0.05)
    k1 = (logp - token_logp(sft_a, tokens)).detach()
    assert torch.allclose(penalty_a, -0.05 * k1 * mask, atol=1e-15)
    assert m_a["kl/soup"] == pytest.approx(float((k1 * mask).sum() / mask.sum()), rel=1e-12)


@pytest.mark.covers("salsa")
def test_salsa_loss_placement_has_the_kl_gradient_and_errors():
    logp = rand(50, 2, 4).requires_grad_(True)
    ref = rand(51, 2, 4)
    mask = torch.ones(2, 4, dtype=D)
    loss, _ = salsa(logp, ref, mask, beta=0.5, placement="loss", estimator="k2")
    assert torch.allclose(grads(loss, logp)[0], 0.5 * (logp - ref).detach() / 8, atol=1e-15)
    with pytest.raises(ValueError, match="all zero"):
        salsa(logp, ref, torch.zeros(2, 4, dtype=D))
    with pytest.raises(ValueError, match="placement"):
        salsa(logp, ref, mask, placement="advantage")
