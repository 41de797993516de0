"""F7 preference objectives beyond the pairwise core: LiPO (listwise), P3O, APO, SALSA (proximal / reference
moving), MCTS-DPO, REFUEL, Direct Advantage PO (step / turn level), BRAIn, SPO preference degrees.

DPO is computed inline from its formula -log sigma(beta (u_w - u_l)) (no dependency on the dpo module)."""
import math

import pytest
import torch
import torch.nn.functional as F

from workbench import registry
from workbench.preference.amortized import brain, brain_weights, degrade_response, degree_labels, spo_prefdeg
from workbench.preference.listwise import lambda_weights, lipo, model_ranks
from workbench.preference.proximal import (apo_accelerated, extrapolated_reference, interpolated_state_dict, p3o,
                                           salsa, soup_model, soup_state_dict)
from workbench.preference.stepwise import (conservative_label_smoothing, direct_advantage_po, first_diverging_token,
                                           mcts_dpo, refuel, seq_logp, step_advantages)

D = torch.float64


def rand(seed, *shape, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=D) * scale


def pair(seed, B=6):
    """Policy leaves (chosen, rejected) and reference log-probs, [B] each."""
    c, r = ((-5 + rand(seed + i, B)).requires_grad_(True) for i in (0, 1))
    return c, r, -5 + rand(seed + 2, B), -5 + rand(seed + 3, B)


def dpo_inline(c, r, rc, rr, beta):
    return -F.logsigmoid(beta * ((c - rc) - (r - rr))).mean()


def grads(loss, *xs):
    return torch.autograd.grad(loss, xs)


KEYS = ["lipo", "p3o", "apo-accelerated", "brain", "spo-prefdeg", "refuel", "mcts-dpo", "direct-advantage-po", "salsa"]


@pytest.mark.covers(*KEYS)
def test_every_key_is_registered_as_preference_with_catalog_confidence():
    catalog = registry.catalog()
    kinds = {"salsa": "reference"}  # SALSA is a way to build the reference, not a pairwise loss
    for key in KEYS:
        entry = registry.get(kinds.get(key, "preference"), key)
        assert entry.confidence == catalog[key]["confidence"]
        assert entry.title == catalog[key]["title"] and entry.equation and entry.fn.__doc__
    assert registry.get("preference", "brain").confidence == "abstract-only"
    assert registry.get("preference", "lipo").defaults == {"beta": 0.1, "labels": None, "weights": "lambda"}
    assert registry.get("preference", "mcts-dpo").defaults["beta"] == 0.1
    assert registry.get("preference", "refuel").defaults["eta"] == 1.0
    assert registry.get("preference", "apo-accelerated").defaults["alpha"] == 0.3
    assert registry.get("preference", "spo-prefdeg").defaults["lam"] == 0.1


# ---------------------------------------------------------------------------------------------- LiPO


def lipo_loops(logps, ref, labels, beta):
    """LiPO-lambda with explicit loops: rank by score (ties by label), Delta per pair, sum over ordered pairs."""
    B, K = logps.shape
    total = 0.0
    for b in range(B):
        s = [beta * (logps[b, i] - ref[b, i]) for i in range(K)]
        order = sorted(range(K), key=lambda i: (-float(s[i].detach()), -float(labels[b, i]), i))
        tau = {item: pos + 1 for pos, item in enumerate(order)}
        for i in range(K):
            for j in range(K):
                if labels[b, i] > labels[b, j]:
                    gi, gj = 2 ** float(labels[b, i]) - 1, 2 ** float(labels[b, j]) - 1
                    delta = abs(gi - gj) * abs(1 / math.log2(1 + tau[i]) - 1 / math.log2(1 + tau[j]))
                    total = total - delta * F.logsigmoid(s[i] - s[j])
    return total / B


@pytest.mark.covers("lipo")
def test_lipo_k2_constant_weights_is_dpo_value_and_gradient():
    c, r, rc, rr = pair(0)
    for beta in (0.1, 0.5):
        loss, m = lipo(c, r, rc, rr, beta=beta, weights="constant")
        ref = dpo_inline(c, r, rc, rr, beta)
        assert loss.item() == pytest.approx(ref.item(), rel=1e-12)
        for a, b in zip(grads(loss, c, r), grads(ref, c, r)):
            assert torch.allclose(a, b, atol=1e-14)
        # the same list given as one [B, 2] tensor, column 0 the best
        loss2, _ = lipo(torch.stack([c, r], -1), None, torch.stack([rc, rr], -1), None, beta=beta, weights="constant")
        assert loss2.item() == pytest.approx(ref.item(), rel=1e-12)
    assert m["rewards/margins"] == pytest.approx(float((0.5 * ((c - rc) - (r - rr))).detach().mean()), rel=1e-12)


@pytest.mark.covers("lipo")
def test_lipo_k2_lambda_weights_are_dpo_times_the_one_pair_weight():
    c, r, rc, rr = pair(1)
    loss, _ = lipo(c, r, rc, rr, beta=0.2)                    # default labels psi = (1, 0): G = (1, 0)
    scale = 1 - 1 / math.log2(3)                             # |1/D(1) - 1/D(2)|
    assert loss.item() == pytest.approx(scale * dpo_inline(c, r, rc, rr, 0.2).item(), rel=1e-12)


@pytest.mark.covers("lipo")
def test_lipo_matches_explicit_pair_loops_with_graded_labels():
    B, K, beta = 3, 5, 0.3
    logps, ref = (-4 + rand(10, B, K)).requires_grad_(True), -4 + rand(11, B, K)
    labels = torch.tensor([[0.9, 0.1, 0.5, 0.5, 0.0], [1.0, 2.0, 0.0, 3.0, 1.5], [0.2, 0.2, 0.8, 0.1, 0.4]], dtype=D)
    loss, m = lipo(logps, None, ref, None, beta=beta, labels=labels)
    expected = lipo_loops(logps, ref, labels, beta)
    assert loss.item() == pytest.approx(expected.item(), rel=1e-12)
    assert torch.allclose(grads(loss, logps)[0], grads(expected, logps)[0], atol=1e-14)
    assert 0 <= m["lipo/pair_accuracy"] <= 1 and 0 < m["lipo/ndcg"] <= 1


@pytest.mark.covers("lipo")
def test_lipo_lambda_weights_symmetric_zero_for_equal_labels():
    labels = torch.tensor([[2.0, 1.0, 1.0, 0.0]], dtype=D)
    scores = rand(3, 1, 4)
    delta = lambda_weights(labels, scores)[0]
    assert torch.equal(delta, delta.T) and torch.all(delta.diagonal() == 0)
    assert delta[1, 2] == 0 and delta[0, 3] > 0
    tau = model_ranks(scores, labels)[0]
    G = 2 ** labels[0] - 1
    expected = abs(G[0] - G[3]) * abs(1 / math.log2(1 + tau[0]) - 1 / math.log2(1 + tau[3]))
    assert delta[0, 3].item() == pytest.approx(float(expected), rel=1e-14)


@pytest.mark.covers("lipo")
@pytest.mark.parametrize("at_init", [False, True])
def test_lipo_is_invariant_to_permuting_the_list(at_init):
    B, K = 4, 5
    logps = -4 + rand(20, B, K)
    ref = logps.clone() if at_init else -4 + rand(21, B, K)   # at init every score is 0: ties broken by label
    labels = rand(22, B, K)
    loss, _ = lipo(logps, None, ref, None, labels=labels)
    perm = torch.stack([torch.randperm(K, generator=torch.Generator().manual_seed(b)) for b in range(B)])
    take = lambda x: x.gather(-1, perm)  # noqa: E731
    loss_p, _ = lipo(take(logps), None, take(ref), None, labels=take(labels))
    assert loss_p.item() == pytest.approx(loss.item(), rel=1e-12)
    if at_init:
        assert loss.item() > 0                               # the weights are not all zero at pi = pi_ref


@pytest.mark.covers("lipo")
def test_lipo_ties_in_labels_form_no_pair_and_all_tied_is_an_error():
    logps, ref = -3 + rand(30, 2, 3), -3 + rand(31, 2, 3)
    tied = torch.tensor([[1.0, 1.0, 0.0], [0.5, 0.5, 0.5]], dtype=D)   # second list: no preference at all
    loss, m = lipo(logps, None, ref, None, labels=tied, weights="constant")
    s = 0.1 * (logps - ref)
    expected = (-F.logsigmoid(s[0, 0] - s[0, 2]) - F.logsigmoid(s[0, 1] - s[0, 2])) / 2   # the tied list adds 0
    assert loss.item() == pytest.approx(expected.item(), rel=1e-12)
    assert m["lipo/pairs_per_list"] == 1.0
    with pytest.raises(ValueError, match="no strictly ordered pair"):
        lipo(logps, None, ref, None, labels=torch.ones(2, 3, dtype=D))


@pytest.mark.covers("lipo")
def test_lipo_bad_inputs_are_clear_errors():
    logps, ref = -3 + rand(40, 2, 3), -3 + rand(41, 2, 3)
    bad = logps.clone()
    bad[1, 2] = float("nan")
    with pytest.raises(ValueError, match="NaN/inf"):
        lipo(bad, None, ref, None)
    with pytest.raises(ValueError, match="at least 2 responses"):
        lipo(logps[:, :1], None, ref[:, :1], None)
    with pytest.raises(ValueError, match="empty"):
        lipo(logps[:0], None, ref[:0], None)
    with pytest.raises(ValueError, match="labels must have"):
        lipo(logps, None, ref, None, labels=torch.zeros(2, 4, dtype=D))
    with pytest.raises(ValueError, match="unknown weights"):
        lipo(logps, None, ref, None, weights="ndcg")
    with pytest.raises(ValueError, match="beta"):
        lipo(logps, None, ref, None, beta=0.0)


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
