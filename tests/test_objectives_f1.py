"""F1 canonical sequence-ratio, soft-gate, CISPO and TIS objectives."""
import math

import pytest
import torch

from tests.helpers import random_mask
from workbench import ops, registry
from workbench.objectives.cispo import cispo
from workbench.objectives.ppo import ppo_clip
from workbench.objectives.sequence import geo_mean, gspo, luspo
from workbench.objectives.soft import sapo
from workbench.objectives.tis import tis, tis_weights

D = torch.float64


def tokens(ratios, advantages):
    """One token per row at the given ratios and advantages; returns (logp leaf [N,1], old, A, mask)."""
    r = torch.as_tensor(ratios, dtype=D).reshape(-1, 1)
    A = torch.as_tensor(advantages, dtype=D).reshape(-1, 1).expand_as(r).clone()
    return torch.log(r).requires_grad_(True), torch.zeros_like(r), A, torch.ones_like(r)


def random_batch(seed, B=6, T=7, scale=0.3):
    """Random logp leaf, old, per-sequence advantage broadcast over the mask, and a ragged mask."""
    g = torch.Generator().manual_seed(seed)
    mask = random_mask(B, T, g)
    old = -torch.rand(B, T, generator=g, dtype=D) * 2
    logp = (old + torch.randn(B, T, generator=g, dtype=D) * scale).requires_grad_(True)
    A = torch.randn(B, 1, generator=g, dtype=D).expand(B, T) * mask
    return logp, old, A, mask


def grad(loss, x):
    return torch.autograd.grad(loss, x)[0]


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
def test_gspo_refuses_other_aggregations_and_passes_denom():
    logp, old, A, mask = random_batch(3)
    for agg in ("token-mean", "seq-mean-token-sum"):
        with pytest.raises(ValueError, match="trl#3823"):
            gspo(logp, old, A, mask, agg=agg)
    loss, _ = gspo(logp, old, A, mask)
    twice, _ = gspo(logp, old, A, mask, denom=ops.Denominators(num_seqs=2 * mask.shape[0]))
    assert twice.item() == pytest.approx(loss.item() / 2)
    assert registry.get("objective", "gspo").defaults == {
        "agg": "seq-mean-token-mean", "denom": None, "eps_low": 3e-4, "eps_high": 4e-4, "logr_clamp": None}


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


# ---------------------------------------------------------------------------------------------- sapo


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


# --------------------------------------------------------------------------------------------- cispo


def cispo_token_grad(r, sign, **kw):
    logp, old, A, mask = tokens(r, sign)
    loss, m = cispo(logp, old, A, mask, agg="token-mean", **kw)
    return grad(loss * len(r), logp)[:, 0], m


@pytest.mark.covers("cispo")
@pytest.mark.parametrize("kw", [{}, {"cap_abs": None, "eps_low": 0.2, "eps_high": 0.28}])
def test_cispo_on_policy_gradient_is_minus_advantage(kw):
    logp, old, A, mask = random_batch(8)
    loss, m = cispo(logp, logp.detach(), A, mask, **kw)
    reinforce = ops.aggregate(-A * logp, mask, "token-mean")
    assert torch.allclose(grad(loss, logp), grad(reinforce, logp), atol=1e-15)
    assert m["clip/cispo"] == 0 and m["cispo/weight_mean"] == pytest.approx(1.0)


@pytest.mark.covers("cispo")
def test_cispo_out_of_bound_tokens_keep_the_capped_gradient():
    r = torch.tensor([0.1, 0.5, 0.9, 1.0, 1.5, 4.9, 5.0, 7.0, 50.0], dtype=D)
    for sign in (1.0, -1.0):
        g, m = cispo_token_grad(r, sign)  # TRL default cap_abs = 5
        assert torch.allclose(g, -sign * r.clamp(max=5.0), rtol=1e-14)
        assert torch.all(g != 0)
        assert m["clip/cispo"] == pytest.approx(2 / 9 if sign > 0 else 0.0)
        assert m["clip/out_of_band"] == pytest.approx(2 / 9)
        g, m = cispo_token_grad(r, sign, cap_abs=None, eps_low=0.2, eps_high=0.28)
        assert torch.allclose(g, -sign * r.clamp(0.8, 1.28), rtol=1e-14)
        assert torch.all(g != 0)
        assert m["clip/out_of_band"] == pytest.approx(7 / 9)
        assert m["clip/cispo"] == pytest.approx(5 / 9 if sign > 0 else 0.0)
        assert m["clip/low"] == pytest.approx(0.0 if sign > 0 else 2 / 9)


@pytest.mark.covers("cispo")
def test_cispo_conventions_coincide_without_lower_bound():
    logp, old, A, mask = random_batch(9, scale=0.6)
    a, ma = cispo(logp, old, A, mask, cap_abs=1.28)
    b, mb = cispo(logp, old, A, mask, cap_abs=None, eps_low=1.0, eps_high=0.28)
    assert a.item() == pytest.approx(b.item(), rel=1e-14)
    assert torch.allclose(grad(a, logp), grad(b, logp), atol=1e-15)
    assert ma["clip/cispo"] == pytest.approx(mb["clip/cispo"]) and ma["clip/cispo"] > 0


@pytest.mark.covers("cispo")
def test_cispo_convention_errors_name_both_readings():
    logp, old, A, mask = random_batch(10)
    bad = [dict(eps_low=0.2, eps_high=0.28),               # cap_abs left at its default
           dict(cap_abs=None),                              # nothing
           dict(cap_abs=None, eps_high=0.28),               # half of verl's
           dict(cap_abs=0.28)]                              # relative value given as absolute cap
    for kw in bad:
        with pytest.raises(ValueError, match="cap_abs") as e:
            cispo(logp, old, A, mask, **kw)
        assert "TRL" in str(e.value) and "verl" in str(e.value)
    assert registry.get("objective", "cispo").defaults["cap_abs"] == 5.0


# ----------------------------------------------------------------------------------------------- tis


def mismatched(seed, scale=0.4):
    logp, old, A, mask = random_batch(seed)
    g = torch.Generator().manual_seed(seed + 100)
    mu = old + torch.randn(old.shape, generator=g, dtype=D) * scale
    return logp, old, A, mask, mu


@pytest.mark.covers("tis")
@pytest.mark.parametrize("mode", ["token_truncate", "token_mask", "sequence_truncate", "sequence_mask"])
def test_tis_with_mu_equal_old_is_ppo_clip(mode):
    logp, old, A, mask = random_batch(11)
    assert torch.equal(tis_weights(old, old.clone(), mask, mode=mode), mask)
    loss, m = tis(logp, old, A, mask, mu_logp=old.clone(), mode=mode, agg="seq-mean-token-mean")
    ref, m_ref = ppo_clip(logp, old, A, mask, agg="seq-mean-token-mean")
    assert loss.item() == ref.item()
    assert torch.equal(grad(loss, logp), grad(ref, logp))
    assert m["tis/mean_weight"] == 1 and m["tis/masked_frac"] == 0 and m["mismatch/abs_logp_diff_max"] == 0
    assert m["clip/region"] == m_ref["clip/region"]


@pytest.mark.covers("tis")
def test_tis_weights_values_and_cap():
    _, old, _, mask, mu = mismatched(12, scale=1.0)
    w_tok = torch.exp(old - mu)
    W_seq = torch.exp(((old - mu) * mask).sum(-1, keepdim=True)).expand_as(old)
    C = 1.5
    w = tis_weights(old, mu, mask, mode="token_truncate", cap=C)
    assert torch.equal(w, torch.minimum(w_tok, torch.tensor(C, dtype=D)) * mask) and w.max() <= C
    w = tis_weights(old, mu, mask, mode="sequence_truncate", cap=C)
    assert torch.allclose(w, W_seq.clamp(max=C) * mask) and w.max() <= C
    w = tis_weights(old, mu, mask, mode="token_mask", cap=C, low=1 / C)
    keep = (w_tok <= C) & (w_tok >= 1 / C) & (mask > 0)
    assert torch.equal(w, torch.where(keep, w_tok, 0.0)) and 0 < keep.sum() < mask.sum()
    w = tis_weights(old, mu, mask, mode="sequence_mask", cap=C)
    keep_seq = (W_seq <= C) & (mask > 0)
    assert torch.allclose(w, torch.where(keep_seq, W_seq, 0.0))
    # a huge sequence log-ratio overflows exp() but stays well defined
    w = tis_weights(old * 0, old * 0 - 1000, mask, mode="sequence_mask", cap=3.0)
    assert torch.equal(w, torch.zeros_like(w))


@pytest.mark.covers("tis")
@pytest.mark.parametrize("mode", ["token_mask", "sequence_mask"])
def test_tis_masked_tokens_have_zero_gradient_and_metrics(mode):
    logp, old, A, mask, mu = mismatched(13, scale=0.8)
    loss, m = tis(logp, old, A, mask, mu_logp=mu, mode=mode, cap=2.0, low=0.15)
    g = grad(loss, logp)
    w = tis_weights(old, mu, mask, mode=mode, cap=2.0, low=0.15)
    dropped = (w == 0) & (mask > 0)
    assert dropped.any() and torch.all(g[dropped] == 0)
    assert torch.all(g[(w > 0) & (A != 0)] != 0) or m["clip/region"] > 0
    assert m["tis/masked_frac"] == pytest.approx((dropped.sum() / mask.sum()).item())
    assert m["tis/mean_weight"] == pytest.approx(((w * mask).sum() / mask.sum()).item())
    assert m["mismatch/abs_logp_diff_max"] == pytest.approx(((old - mu).abs() * mask).max().item())
    # the loss is the PPO per-token loss times w, aggregated as asked
    ref, _ = ppo_clip(logp, old, A, mask)
    assert torch.allclose(g, grad(ref, logp) * w, atol=1e-15)


@pytest.mark.covers("tis")
def test_tis_no_gradient_through_mu_or_old():
    logp, old, A, mask, mu = mismatched(14)
    old = old.clone().requires_grad_(True)
    mu = mu.clone().requires_grad_(True)
    for mode in ("token_truncate", "sequence_mask"):
        loss, _ = tis(logp, old, A, mask, mu_logp=mu, mode=mode)
        g_old, g_mu = torch.autograd.grad(loss, [old, mu], allow_unused=True)
        assert g_old is None and g_mu is None
        assert not tis_weights(old, mu, mask, mode=mode).requires_grad


@pytest.mark.covers("tis")
def test_tis_bad_inputs():
    logp, old, A, mask, mu = mismatched(15)
    with pytest.raises(ValueError, match="unknown TIS mode"):
        tis(logp, old, A, mask, mu_logp=mu, mode="token")
    with pytest.raises(ValueError, match="mu_logp has shape"):
        tis(logp, old, A, mask, mu_logp=mu[:, :3])
    with pytest.raises(ValueError, match="cap must be > 0"):
        tis_weights(old, mu, mask, cap=0.0)
    with pytest.raises(ValueError, match="mask modes"):
        tis_weights(old, mu, mask, mode="token_truncate", low=0.5)
    with pytest.raises(ValueError, match="low < cap"):
        tis_weights(old, mu, mask, mode="token_mask", cap=2.0, low=3.0)
    with pytest.raises(TypeError, match="mu_logp"):
        tis(logp, old, A, mask)
    assert "mu_logp" not in registry.get("objective", "tis").defaults


# ------------------------------------------------------------------------------------------- all six


@pytest.mark.covers("gspo", "geo_mean", "luspo", "sapo", "cispo", "tis")
@pytest.mark.parametrize("key", ["gspo", "geo_mean", "luspo", "sapo", "cispo", "tis"])
def test_registered_with_equation_and_clear_input_errors(key):
    entry = registry.get("objective", key)
    assert entry.equation and entry.family == "canonical" and entry.fn.__doc__
    x = torch.zeros(2, 3, dtype=D)
    extra = {"mu_logp": x} if key == "tis" else {}
    with pytest.raises(ValueError, match="advantages has shape"):
        entry.fn(x, x, torch.zeros(2, 4, dtype=D), torch.ones(2, 3, dtype=D), **extra)
    with pytest.raises(ValueError, match="all zero"):
        entry.fn(x, x, x, torch.zeros(2, 3, dtype=D), **extra)
    with pytest.raises(ValueError, match="NaN"):
        entry.fn(x, x, torch.full((2, 3), float("nan"), dtype=D), torch.ones(2, 3, dtype=D), **extra)
