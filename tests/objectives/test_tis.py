"""Truncated importance sampling (TIS) against the rollout engine's log-probs."""
import pytest
import torch

from tests.helpers import D, grad, random_batch
from workbench import registry
from workbench.objectives.ppo import ppo_clip
from workbench.objectives.tis import tis, tis_weights


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
