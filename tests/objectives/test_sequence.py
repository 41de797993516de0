"""Sequence-ratio objectives: GSPO, GMPO (geo_mean) and LUSPO."""
import math

import pytest
import torch

from tests.helpers import D, grad, random_batch, tokens
from workbench import ops, registry
from workbench.objectives.ppo import ppo_clip
from workbench.objectives.sequence import geo_mean, gspo, luspo


def seq_len(mask):
    return mask.sum(-1).clamp(min=1)


# ---------------------------------------------------------------------------------------------- gspo


def gspo_sequence_form(logp, old, A, mask, eps_low, eps_high):
    """TRL `importance_sampling_level="sequence"` / OpenRLHF `gspo`: s_i differentiated directly,
    broadcast over tokens, then seq-mean-token-mean (TRL `grpo` normalization)."""
    s = torch.exp(((logp - old) * mask).sum(-1, keepdim=True) / seq_len(mask)[:, None])
    per_token = -torch.minimum(s * A, s.clamp(1 - eps_low, 1 + eps_high) * A)
    return ((per_token * mask).sum(-1) / seq_len(mask)).mean()


@pytest.mark.covers("gspo")
@pytest.mark.parametrize("eps", [(3e-4, 4e-4), (0.05, 0.1)])
def test_gspo_token_form_matches_sequence_form_value_and_gradient(eps):
    logp, old, A, mask = random_batch(0, scale=0.05)
    loss, m = gspo(logp, old, A, mask, eps_low=eps[0], eps_high=eps[1])
    ref = gspo_sequence_form(logp, old, A, mask, *eps)
    assert loss.item() == pytest.approx(ref.item(), rel=1e-12, abs=1e-14)
    assert torch.allclose(grad(loss, logp), grad(ref, logp), atol=1e-14)
    assert 0 <= m["clip/region"] <= m["clip/out_of_band"] <= 1


@pytest.mark.covers("gspo")
def test_gspo_per_token_gradient_is_s_times_advantage():
    logp, old, A, mask = random_batch(1, scale=0.01)
    loss, _ = gspo(logp, old, A, mask, eps_low=10.0, eps_high=10.0)  # nothing clipped
    s = torch.exp(((logp.detach() - old) * mask).sum(-1) / seq_len(mask))
    B = mask.shape[0]
    expected = -(s[:, None] * A) * mask / seq_len(mask)[:, None] / B
    assert torch.allclose(grad(loss, logp), expected, atol=1e-15)


@pytest.mark.covers("gspo")
def test_gspo_with_one_token_per_sequence_is_ppo_clip():
    r = torch.linspace(0.5, 1.6, 23, dtype=D)
    for sign in (1.0, -1.0):
        logp, old, A, mask = tokens(r, sign)
        kw = dict(eps_low=0.2, eps_high=0.28)
        loss, m = gspo(logp, old, A, mask, **kw)
        ref, m_ref = ppo_clip(logp, old, A, mask, agg="seq-mean-token-mean", **kw)
        assert loss.item() == pytest.approx(ref.item(), rel=1e-14)
        assert torch.allclose(grad(loss, logp), grad(ref, logp), atol=1e-15)
        for k in ("clip/low", "clip/high", "clip/region", "clip/out_of_band"):
            assert m[k] == pytest.approx(m_ref[k])
    # one valid token at a different position in each (padded) row
    g = torch.Generator().manual_seed(2)
    mask = torch.zeros(5, 4, dtype=D)
    mask[torch.arange(5), torch.tensor([0, 3, 1, 2, 0])] = 1
    logp = (torch.randn(5, 4, generator=g, dtype=D) * 0.3).requires_grad_(True)
    A = torch.randn(5, 1, generator=g, dtype=D).expand(5, 4) * mask
    old = torch.zeros(5, 4, dtype=D)
    loss, _ = gspo(logp, old, A, mask, eps_low=0.2, eps_high=0.2)
    ref, _ = ppo_clip(logp, old, A, mask, agg="seq-mean-token-mean")
    assert torch.allclose(grad(loss, logp), grad(ref, logp), atol=1e-15)


@pytest.mark.covers("gspo")
def test_gspo_clipped_sequence_has_zero_gradient_on_all_its_tokens():
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0], [1, 1, 0, 0]], dtype=D)
    # row 0: mean log-ratio 0.5 with A > 0 -> clipped; row 1: mean -0.5 with A < 0 -> clipped; row 2 inside
    logr = torch.tensor([[0.9, 0.1, 0.6, 0.4], [-1.0, 0.0, -0.5, 7.0], [0.01, -0.01, 0.0, 0.0]], dtype=D)
    old = torch.full((3, 4), -1.0, dtype=D)
    logp = (old + logr).requires_grad_(True)
    A = torch.tensor([[1.0], [-2.0], [0.5]], dtype=D).expand(3, 4) * mask
    loss, m = gspo(logp, old, A, mask, eps_low=0.2, eps_high=0.2)
    g = grad(loss, logp)
    assert torch.all(g[:2] == 0)
    assert torch.all(g[2, :2] != 0) and torch.all(g[2, 2:] == 0)  # padding gets nothing
    assert m["clip/high"] == pytest.approx(1 / 3) and m["clip/low"] == pytest.approx(1 / 3)


@pytest.mark.covers("gspo")
def test_gspo_takes_any_aggregation_and_passes_denom():
    """seq-mean-token-mean is the paper's loss; token-mean (verl's actor default) weights each sequence's
    gradient by its length (trl#3823): with a constant per-sequence gradient direction, the ratio of the two
    losses' gradients on row i is |y_i| B / N."""
    logp, old, A, mask = random_batch(3)
    old = logp.detach().clone()  # on-policy: s_i = 1, nothing clipped, so the gradients are plain A ∇logp
    seq, _ = gspo(logp, old, A, mask)
    tok, _ = gspo(logp, old, A, mask, agg="token-mean")
    lengths, B, N = mask.sum(-1), float((mask.sum(-1) > 0).sum()), mask.sum()
    g_seq, g_tok = grad(seq, logp), grad(tok, logp)
    expected = g_seq * (lengths * B / N)[:, None]
    assert torch.allclose(g_tok, expected, atol=1e-12) and not torch.allclose(g_tok, g_seq)
    twice, _ = gspo(logp, old, A, mask, denom=ops.Denominators(num_seqs=2 * mask.shape[0]))
    assert twice.item() == pytest.approx(seq.item() / 2)
    assert registry.get("objective", "gspo").defaults == {
        "agg": "seq-mean-token-mean", "denom": None, "eps_low": 3e-4, "eps_high": 4e-4, "logr_clamp": None,
        "upper_clamp_only": False}


@pytest.mark.covers("gspo")
def test_gspo_upper_clamp_only_leaves_very_negative_log_ratios_unclamped():
    """verl clamps the token-form log-ratio at +10 only: a sequence with mean log-ratio -12 and A > 0 keeps
    s = e^-12 and its gradient; the symmetric clamp pins it at e^-10 with no gradient."""
    mask = torch.ones(2, 3, dtype=D)
    old = torch.zeros(2, 3, dtype=D)
    logp = torch.tensor([[-12.0] * 3, [12.0] * 3], dtype=D).requires_grad_(True)
    A = torch.tensor([[1.0], [-1.0]], dtype=D).expand(2, 3)
    both, m_both = gspo(logp, old, A, mask, eps_low=0.2, eps_high=0.2, logr_clamp=10.0)
    upper, m_upper = gspo(logp, old, A, mask, eps_low=0.2, eps_high=0.2, logr_clamp=10.0, upper_clamp_only=True)
    # row 0: A > 0 and s < 1 - eps, the unclipped branch: loss -s A; the symmetric clamp puts s at e^-10
    assert both.item() == pytest.approx((-math.exp(-10) + math.exp(10)) / 2)
    assert upper.item() == pytest.approx((-math.exp(-12) + math.exp(10)) / 2)
    g_both, g_upper = grad(both, logp), grad(upper, logp)
    assert torch.all(g_both[0] == 0) and torch.all(g_upper[0] != 0)  # clamped below: no gradient; unclamped: some
    assert torch.all(g_both[1] == 0) and torch.all(g_upper[1] == 0)  # clamped above in both


# ------------------------------------------------------------------------------------------ geo_mean


@pytest.mark.covers("geo_mean")
@pytest.mark.parametrize("c", [-0.7, -0.2, 0.1, 0.3, 0.9])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_geo_mean_equal_log_ratios_give_the_clipped_token_ratio(c, sign):
    mask = torch.ones(1, 5, dtype=D)
    logp = torch.full((1, 5), c, dtype=D)
    A = torch.full((1, 5), sign, dtype=D)
    loss, m = geo_mean(logp, torch.zeros_like(logp), A, mask)
    clipped = min(c, 0.4) if sign > 0 else max(c, -0.4)  # toward the advantage only
    assert -loss.item() / sign == pytest.approx(math.exp(clipped), rel=1e-13)
    assert m["geo/seq_ratio_mean"] == pytest.approx(math.exp(clipped))


@pytest.mark.covers("geo_mean")
def test_geo_mean_outlier_token_moves_the_sequence_ratio_geometrically():
    n = 5
    mask, A = torch.ones(1, n, dtype=D), torch.ones(1, n, dtype=D)
    for delta in (0.1, 0.3, 2.0, 6.0):
        logr = torch.zeros(1, n, dtype=D)
        logr[0, 2] = delta
        loss, _ = geo_mean(logr, torch.zeros_like(logr), A, mask)
        S = -loss.item()
        assert S == pytest.approx(math.exp(min(delta, 0.4) / n), rel=1e-13)  # capped at exp(eps_high/|y|)
        arithmetic = 1 + math.expm1(delta) / n  # arithmetic mean of token ratios
        assert S < arithmetic


@pytest.mark.covers("geo_mean")
def test_geo_mean_gradient_is_zero_exactly_on_tokens_clipped_toward_the_advantage():
    mask = torch.tensor([[1, 1, 1, 1, 1, 0]], dtype=D)
    logr = torch.tensor([[0.7, 0.2, -0.9, -0.1, 0.5, 3.0]], dtype=D)
    n = 5
    for sign in (1.0, -1.0):
        logp = logr.clone().requires_grad_(True)
        A = torch.full((1, 6), 2 * sign, dtype=D) * mask
        loss, m = geo_mean(logp, torch.zeros_like(logp), A, mask, eps_low=0.4, eps_high=0.4)
        g = grad(loss, logp)[0]
        frozen = (logr[0] > 0.4) if sign > 0 else (logr[0] < -0.4)
        frozen = frozen | (mask[0] == 0)
        rho = torch.where(logr[0] > 0.4, 0.4, logr[0]) if sign > 0 else torch.where(logr[0] < -0.4, -0.4, logr[0])
        S = torch.exp((rho * mask[0]).sum() / n)
        assert torch.all(g[frozen] == 0)
        assert torch.allclose(g[~frozen], -2 * sign * S / n * torch.ones_like(g[~frozen]), rtol=1e-13)
        assert m["clip/high" if sign > 0 else "clip/low"] == pytest.approx((2 if sign > 0 else 1) / n)
        assert m["clip/out_of_band"] == pytest.approx(3 / n)


@pytest.mark.covers("geo_mean")
def test_geo_mean_is_a_mean_over_sequences():
    logp, old, A, mask = random_batch(4)
    loss, _ = geo_mean(logp, old, A, mask)
    rho = []
    for i in range(mask.shape[0]):
        lr = (logp[i] - old[i]).detach()[mask[i] > 0]
        a = A[i, 0].item()
        clipped = lr.clamp(max=0.4) if a > 0 else lr.clamp(min=-0.4)
        rho.append(-a * torch.exp(clipped.mean()))
    assert loss.item() == pytest.approx(torch.stack(rho).mean().item(), rel=1e-13)
    with pytest.raises(ValueError, match="seq-mean-token-mean"):
        geo_mean(logp, old, A, mask, agg="token-mean")


# --------------------------------------------------------------------------------------------- luspo


@pytest.mark.covers("luspo")
def test_luspo_per_sample_gradient_is_length_times_gspo():
    logp, old, A, mask = random_batch(5, scale=0.1)
    kw = dict(eps_low=0.05, eps_high=0.08)  # some sequences clipped, some not
    lu, _ = luspo(logp, old, A, mask, **kw)
    gs, _ = gspo(logp, old, A, mask, **kw)
    assert torch.allclose(grad(lu, logp), mask.sum(-1, keepdim=True) * grad(gs, logp), atol=1e-15)
    # TRL form: mean_i(l_i |y_i|) with the sequence-level per-sequence loss
    s = torch.exp(((logp - old) * mask).sum(-1) / seq_len(mask)).detach()
    a = A[:, 0]
    l_seq = -torch.minimum(s * a, s.clamp(1 - 0.05, 1 + 0.08) * a)
    assert lu.item() == pytest.approx((l_seq * mask.sum(-1)).mean().item(), rel=1e-12)


@pytest.mark.covers("luspo")
def test_luspo_with_equal_lengths_is_proportional_to_gspo():
    logp, old, A, _ = random_batch(6)
    mask = torch.ones_like(old)
    mask[:, 5:] = 0
    lu, _ = luspo(logp, old, A * mask, mask)
    gs, _ = gspo(logp, old, A * mask, mask)
    assert lu.item() == pytest.approx(5 * gs.item(), rel=1e-13)
    with pytest.raises(ValueError, match="seq-mean-token-sum"):
        luspo(logp, old, A, mask, agg="seq-mean-token-mean")


@pytest.mark.covers("gspo", "luspo")
def test_sequence_clip_fractions_count_empty_completions_as_trl_does():
    """TRL's `global_masked_mean` of a [B, 1] tensor divides by B: an empty completion counts (never clipped)."""
    mask = torch.tensor([[1, 1, 1], [1, 1, 0], [0, 0, 0], [0, 0, 0]], dtype=D)
    old = torch.zeros(4, 3, dtype=D)
    logp = torch.tensor([[0.5] * 3, [0.0] * 3, [0.0] * 3, [0.0] * 3], dtype=D) * mask
    A = torch.tensor([[1.0], [1.0], [0.0], [0.0]], dtype=D).expand(4, 3) * mask
    for objective, agg in ((gspo, "seq-mean-token-mean"), (luspo, "seq-mean-token-sum")):
        _, m = objective(logp, old, A, mask, agg=agg, eps_low=0.2, eps_high=0.2)
        assert m["clip/high"] == pytest.approx(1 / 4)  # one clipped sequence of four rows, not of two
