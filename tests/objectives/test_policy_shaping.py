"""LUFFY's policy shaping: the p/(p + gamma) gradient of off-policy tokens, no clip on them, PPO-clip elsewhere,
and agreement with LUFFY's `compute_token_on_off_policy_loss`."""
import pytest
import torch

from tests.helpers import AGREE_TOL, D, assert_agree, grad, random_batch
from workbench import registry
from workbench.objectives.policy_shaping import policy_shaping, shaped_probability
from workbench.objectives.ppo import ppo_clip

pytestmark = pytest.mark.covers("policy-shaping")

# ElliottYan/LUFFY @ 01f4ae066249e6965ce0d5512ccdf99a12895c74, luffy/verl/verl/mix_src/mix_core_alg.py,
# compute_token_on_off_policy_loss, transcribed on the path of exp_scripts/train.sh (on_policy_reshape="no_reshape",
# off_policy_reshape="p_div_p_0.1", target_probs=None, no off-policy max/min clip, all_max_clip=None,
# loss_remove_token_mean=False here so that it is a token mean), with LUFFY's masked_mean (no epsilon).


def luffy_masked_mean(values, mask, axis=None):
    return (values * mask).sum(axis=axis) / mask.sum(axis=axis)


def luffy_token_on_off_policy_loss(old_log_prob, log_prob, advantages, eos_mask, cliprange, clip_upper_bound,
                                   prefix_mask, loss_remove_clip=False):
    negative_approx_kl = log_prob - old_log_prob
    ratio = torch.exp(negative_approx_kl)
    on_pg_losses = -advantages * ratio
    upper_bound = max(clip_upper_bound, 1.0 + cliprange)
    if loss_remove_clip is False:
        on_pg_losses2 = -advantages * torch.clamp(ratio, 1.0 - cliprange, upper_bound)
        on_pg_losses = torch.max(on_pg_losses, on_pg_losses2)
    off_ratio = torch.exp(log_prob)
    off_ratio = off_ratio / (off_ratio + 0.1)
    off_pg_losses = -advantages * off_ratio
    prefix_mask = prefix_mask.float()
    pg_losses = off_pg_losses * prefix_mask + on_pg_losses * (1 - prefix_mask)
    return luffy_masked_mean(pg_losses, eos_mask)


def mixed_batch(seed, scale=0.6):
    """random_batch with rows 1 and 4 off-policy (their policy tokens), ratios far from 1 everywhere."""
    logp, old, A, mask = random_batch(seed, scale=scale)
    off = torch.zeros_like(mask)
    off[[1, 4]] = mask[[1, 4]]
    return logp, old, A, mask, off


def test_registered_with_luffys_gamma():
    entry = registry.get("objective", "policy-shaping")
    assert {"gamma": 0.1, "eps_low": 0.2, "eps_high": 0.2}.items() <= entry.defaults.items()
    assert entry.reads == ("offpolicy_mask",) and entry.title == "Learning to Reason under Off-Policy Guidance"


@pytest.mark.parametrize("gamma", [0.01, 0.1, 1.0])
@pytest.mark.parametrize("p_target", [0.02, 0.1, 0.5, 0.95])
def test_gradient_wrt_the_sampled_tokens_logit_is_gamma_p_1_minus_p_over_p_plus_gamma_squared(gamma, p_target):
    """Catalog test (1): one off-policy token y with A = 1 under a softmax over 5 logits."""
    logits = torch.zeros(5, dtype=D)
    logits[2] = torch.log(torch.tensor(p_target / (1 - p_target) * 4, dtype=D))  # p(y = 2) = p_target
    logits.requires_grad_(True)
    logp = torch.log_softmax(logits, -1)[2].reshape(1, 1)
    one = torch.ones(1, 1, dtype=D)
    loss, _ = policy_shaping(logp, torch.zeros_like(one), one, one, offpolicy_mask=one, gamma=gamma)
    p = torch.softmax(logits.detach(), -1)[2]
    assert p.item() == pytest.approx(p_target)
    (g,) = torch.autograd.grad(-loss, logits)
    assert g[2].item() == pytest.approx((gamma * p * (1 - p) / (p + gamma) ** 2).item(), rel=1e-12)
    # and with respect to log p: gamma p / (p + gamma)^2, at most 1/4 (reached at p = gamma)
    leaf = logp.detach().clone().requires_grad_(True)
    (g_logp,) = torch.autograd.grad(-policy_shaping(leaf, torch.zeros_like(one), one, one, offpolicy_mask=one,
                                                    gamma=gamma)[0], leaf)
    assert g_logp.item() == pytest.approx((gamma * p / (p + gamma) ** 2).item(), rel=1e-12)
    assert g_logp.item() <= 0.25 + 1e-15


def test_the_weight_peaks_at_p_equal_gamma():
    p = torch.linspace(1e-4, 1, 10001, dtype=D)
    leaf = torch.log(p).requires_grad_(True)
    (w,) = torch.autograd.grad(shaped_probability(leaf, 0.1).sum(), leaf)
    assert p[w.argmax()].item() == pytest.approx(0.1, abs=1e-3) and w.max().item() == pytest.approx(0.25, abs=1e-6)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_off_policy_tokens_are_never_clipped_whatever_the_ratio(seed):
    """Catalog test (2): their loss and gradient ignore old_logp entirely; on-policy ones are PPO-clip's."""
    logp, old, A, mask, off = mixed_batch(seed)
    loss, m = policy_shaping(logp, old, A, mask, offpolicy_mask=off)
    far_old = old + 5.0 * torch.randn(old.shape, generator=torch.Generator().manual_seed(9), dtype=D)
    loss_far, _ = policy_shaping(logp, far_old, A, mask, offpolicy_mask=off)
    o = off > 0
    p = torch.exp(logp.detach())
    expected = -A * 0.1 * p / (p + 0.1) ** 2 / mask.sum()
    for value in (loss, loss_far):
        assert torch.allclose(grad(value, logp)[o], expected[o], atol=1e-15)
    r = torch.exp(logp.detach() - old)
    assert (o & ((r > 1.2) | (r < 0.8))).any()  # PPO would have clipped some of them
    on = (mask > 0) & ~o
    assert torch.equal(grad(loss, logp)[on], grad(ppo_clip(logp, old, A, mask)[0], logp)[on])
    assert m["shaping/offpolicy_frac"] == pytest.approx(off.sum().item() / mask.sum().item())
    assert m["shaping/offpolicy_prob"] == pytest.approx(p[o].mean().item())


@pytest.mark.parametrize("seed", [0, 1])
def test_no_off_policy_tokens_is_ppo_clip(seed):
    """Catalog test (3)."""
    logp, old, A, mask, _ = mixed_batch(seed)
    ours, m = policy_shaping(logp, old, A, mask, offpolicy_mask=torch.zeros_like(mask))
    ref, m_ref = ppo_clip(logp, old, A, mask)
    assert ours.item() == ref.item() and torch.equal(grad(ours, logp), grad(ref, logp))
    assert m["shaping/offpolicy_frac"] == 0 and m["shaping/offpolicy_prob"] == 0
    assert {k: m[k] for k in m_ref} == m_ref


@pytest.mark.parametrize("seed", range(4))
def test_matches_luffys_token_on_off_policy_loss(seed):
    logp, old, A, mask, off = mixed_batch(seed, scale=0.3)
    theirs = luffy_token_on_off_policy_loss(old, logp, A, mask, 0.2, 1.0, off.bool())
    ours, _ = policy_shaping(logp, old, A, mask, offpolicy_mask=off)
    assert_agree(ours, theirs, logp, **AGREE_TOL)
    # LUFFY's script drops the on-policy clip; on the first update after a rollout (r = 1) it is the same loss
    fresh = logp.detach().clone().requires_grad_(True)
    theirs_unclipped = luffy_token_on_off_policy_loss(logp.detach(), fresh, A, mask, 0.2, 1.0, off.bool(),
                                                      loss_remove_clip=True)
    assert_agree(policy_shaping(fresh, logp.detach(), A, mask, offpolicy_mask=off)[0], theirs_unclipped, fresh)


def test_bad_input_is_refused():
    logp, old, A, mask, off = mixed_batch(0)
    with pytest.raises(ValueError, match="gamma must be > 0"):
        policy_shaping(logp, old, A, mask, offpolicy_mask=off, gamma=0.0)
    with pytest.raises(ValueError, match="offpolicy_mask has shape"):
        policy_shaping(logp, old, A, mask, offpolicy_mask=off[:, :2])
    with pytest.raises(ValueError, match="all zero"):
        policy_shaping(logp, old, A, torch.zeros_like(mask), offpolicy_mask=off)
