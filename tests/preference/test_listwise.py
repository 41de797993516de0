"""LiPO (listwise preference optimization) against explicit pair loops.

DPO is computed inline from its formula -log sigma(beta (u_w - u_l)) (no dependency on the dpo module)."""
import math

import pytest
import torch
import torch.nn.functional as F

from tests.helpers import D, dpo_inline, grads, pair, rand
from workbench.preference.listwise import lambda_weights, lipo, model_ranks


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
