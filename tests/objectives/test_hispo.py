"""HiSPO: a sequence mask on the engine mismatch and a token mask on the total ratio, over PPO-clip."""
import math

import pytest
import torch

from tests.helpers import D, grad, random_batch
from workbench import registry
from workbench.objectives.hispo import hispo, sequence_mask, token_mask
from workbench.objectives.ppo import ppo_clip

INF = float("inf")
OPEN = dict(delta_seq=INF, mask_eps_low=INF, mask_eps_high=INF)


def mismatched(seed, B=6, T=7, scale=0.3, mu_scale=0.3):
    logp, old, A, mask = random_batch(seed, B, T, scale)
    g = torch.Generator().manual_seed(seed + 100)
    mu = old + torch.randn(B, T, generator=g, dtype=D) * mu_scale
    return logp, old, mu, A, mask


@pytest.mark.covers("hispo")
def test_hispo_registered_reading_mu_with_catalog_defaults():
    e = registry.get("objective", "hispo")
    assert e.reads == ("mu_logp",) and e.confidence == "abstract-only"
    assert e.defaults["delta_seq"] == pytest.approx(math.log(2))
    assert (e.defaults["mask_eps_low"], e.defaults["mask_eps_high"]) == (0.2, 0.28)
    assert (e.defaults["eps_low"], e.defaults["eps_high"]) == (0.2, 0.28)
    assert e.equation and "Our reading" in e.fn.__doc__


@pytest.mark.covers("hispo")
def test_a_sequence_failing_the_sequence_check_gets_exactly_zero_gradient():
    logp, old, A, mask = random_batch(1, scale=0.1)
    mu = old.clone()
    mu[2] = old[2] - 0.8  # geometric-mean mismatch pi_old/mu = e^0.8 > 2 on row 2 only
    loss, m = hispo(logp, old, A, mask, mu_logp=mu, mask_eps_low=INF, mask_eps_high=INF)
    ref, _ = ppo_clip(logp, old, A, mask, eps_low=0.2, eps_high=0.28)
    g, g_ref = grad(loss, logp), grad(ref, logp)
    assert torch.all(g[2] == 0) and torch.any(g_ref[2] != 0)
    others = torch.arange(A.shape[0]) != 2
    assert torch.equal(g[others], g_ref[others])
    assert m["hispo/seq_masked_frac"] == pytest.approx(1 / A.shape[0])


@pytest.mark.covers("hispo")
def test_the_sequence_check_is_on_the_length_normalized_mismatch():
    old = torch.zeros(4, 2, dtype=D)
    mask = torch.ones_like(old)
    d = math.log(2)
    mu = old - torch.tensor([[1.0, -1.0],      # each token far off, mean 0: kept
                             [0.8, 0.8],       # mean 0.8 > log 2: masked
                             [-0.8, -0.8],     # two-sided: masked
                             [d, d]], dtype=D)  # mean exactly log 2: kept (<=)
    assert sequence_mask(old, mu, mask, delta_seq=d).tolist() == [True, False, False, True]
    # padding does not count: a long padded row with the same mean is judged the same
    padded = torch.tensor([[1.0, 0.0]], dtype=D)
    assert sequence_mask(torch.zeros(1, 2, dtype=D), torch.full((1, 2), -0.8, dtype=D) * padded, padded,
                         delta_seq=d).tolist() == [False]


@pytest.mark.covers("hispo")
def test_the_token_check_is_on_the_total_ratio_staleness_times_mismatch():
    # r = pi_theta/pi_old and w = pi_old/mu each inside [0.8, 1.28], their product pi_theta/mu not
    r = torch.tensor([1.1, 1.1, 0.85, 1.2], dtype=D)
    w = torch.tensor([1.2, 1 / 1.1, 0.9, 0.8], dtype=D)  # totals: 1.32 (out), 1.0, 0.765 (out), 0.96
    old = torch.zeros(4, 1, dtype=D)
    mu = old - torch.log(w)[:, None]
    logp = torch.log(r)[:, None].requires_grad_(True)
    keep = token_mask(logp, mu, mask_eps_low=0.2, mask_eps_high=0.28)[:, 0]
    assert keep.tolist() == [False, True, False, True]
    A, mask = torch.ones(4, 1, dtype=D), torch.ones(4, 1, dtype=D)
    loss, m = hispo(logp, old, A, mask, mu_logp=mu, delta_seq=INF, agg="token-mean")
    g = grad(loss * 4, logp)[:, 0]
    assert torch.all(g[~keep] == 0)
    assert torch.allclose(g[keep], -r[keep], rtol=1e-14)  # PPO-clip inside its band: -r A ∇logp
    assert m["hispo/token_masked_frac"] == pytest.approx(0.5) and m["hispo/seq_masked_frac"] == 0


@pytest.mark.covers("hispo", "ppo-clip")
@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
def test_infinite_thresholds_give_the_unmasked_ppo_clip_objective(agg):
    logp, old, mu, A, mask = mismatched(2, scale=0.5, mu_scale=2.0)
    loss, m = hispo(logp, old, A, mask, mu_logp=mu, agg=agg, dual_clip_c=3.0, **OPEN)
    ref, m_ref = ppo_clip(logp, old, A, mask, agg=agg, eps_low=0.2, eps_high=0.28, dual_clip_c=3.0)
    assert loss.item() == ref.item()
    assert torch.equal(grad(loss, logp), grad(ref, logp))
    assert m_ref["clip/region"] > 0 and m["clip/region"] == m_ref["clip/region"]
    # finite defaults do mask something under this mismatch
    masked, m2 = hispo(logp, old, A, mask, mu_logp=mu)
    assert m2["hispo/seq_masked_frac"] > 0 and m2["hispo/token_masked_frac"] > 0
    assert not torch.equal(grad(masked, logp), grad(ref, logp))


@pytest.mark.covers("hispo")
def test_mu_equal_to_old_and_on_policy_masks_nothing():
    logp, old, A, mask = random_batch(3)
    same = logp.detach()
    loss, m = hispo(logp, same, A, mask, mu_logp=same)
    ref, _ = ppo_clip(logp, same, A, mask, eps_low=0.2, eps_high=0.28)
    assert loss.item() == ref.item() and torch.equal(grad(loss, logp), grad(ref, logp))
    assert m["hispo/seq_masked_frac"] == m["hispo/token_masked_frac"] == m["mismatch/abs_logp_diff_max"] == 0
    # on-policy gradient: REINFORCE -A ∇logp / N
    assert torch.allclose(grad(loss, logp), -A * mask / mask.sum(), atol=1e-17)


@pytest.mark.covers("hispo")
def test_bad_inputs_are_refused_before_computing():
    logp, old, mu, A, mask = mismatched(4)
    for name in ("delta_seq", "mask_eps_low", "mask_eps_high", "eps_low", "eps_high"):
        with pytest.raises(ValueError, match=f"{name} must be >= 0"):
            hispo(logp, old, A, mask, mu_logp=mu, **{name: -0.1})
    with pytest.raises(ValueError, match="mu_logp has shape"):
        hispo(logp, old, A, mask, mu_logp=mu[:, :3])
