"""Agreement with OpenRLHF: value AND gradient, float64, 1e-6, on random inputs.

OpenRLHF cannot be installed here (it needs deepspeed/CUDA), so its conventions are re-derived as formulas
in `tests/anchors/formulas.py` (`openrlhf_*`, each citing file, function and the commit read):
`openrlhf/models/loss.py` and `openrlhf/cli/train_ppo_ray.py` at f5b3f08a, `openrlhf/models/utils.py` at
473f61bd, `openrlhf/trainer/ppo_utils/experience_maker.py` at 89308a0b, `kl_controller.py` at 658ecc34,
`length_penalty.py` at d3f700b7.

Workbench parameters set to OpenRLHF's conventions:

    advantages   group_norm = grpo(Bessel, std + 1e-9); dr_grpo = grpo(scale="none"); rloo = rloo;
                 reinforce / reinforce_baseline = reinforce_plus_plus(_baseline) with the population
                 variance (unbiased=False), eps 1e-8 (OpenRLHF clamps var at 1e-8 where we add 1e-8:
                 a relative 1e-8/var shift); G > 1 required for rloo, reinforce_baseline, group_norm
    policy loss  no log-ratio clamp (logr_clamp=None; f5b3f08a has none); dual clip c on A < 0;
                 token_level_loss=True -> token-mean, False -> seq-mean-token-mean; GSPO forces the latter
    KL           k1/k2/k3 with the result clamped to +-10 (value_clamp=10); in-loss KL = kl_coef * token mean
    rewards      reward_clip_range (-10, 10) on the shaped outcome reward (inactive on these inputs except
                 where a test says so); KL in reward = -kl_coef * k per token, then reward-to-go

OpenRLHF's masks are right-padded (its action_mask is one contiguous span), so the masks here are too; every
row has at least one token (OpenRLHF's per-sequence mean is NaN on an empty row).
"""
from __future__ import annotations

import math

import pytest
import torch

from tests.anchors import formulas as ref
from tests.helpers import AGREE_TOL, anchor_mask as _mask, assert_agree, seeded as _gen, batch_with_mask
from workbench import kl, ops, registry
from workbench.controllers import AdaptiveKLController
from workbench.values import value_loss
from workbench.regularizers.kl_penalty import kl_in_loss, kl_in_reward
from workbench.rewards.length import soft_overlong

F64 = torch.float64
TOL = AGREE_TOL


# ---------------------------------------------------------------------------------------------- inputs


_batch = batch_with_mask


def _outcome_case(seed, G=4, n_groups=3, T=7):
    """Outcome rewards in consecutive groups of G (OpenRLHF's `rewards.reshape(-1, n_samples_per_prompt)`
    layout), the first group all equal; a right-padded mask; logp/ref for KL in the reward."""
    g = _gen(seed)
    B = G * n_groups
    rewards = torch.randint(0, 3, (B,), generator=g).to(F64) + 0.25 * torch.randn(B, generator=g, dtype=F64)
    rewards[:G] = 1.0
    mask = _mask(B, T, g)
    logp = -3.0 * torch.rand(B, T, generator=g, dtype=F64) - 0.05
    ref_logp = logp + 0.4 * torch.randn(B, T, generator=g, dtype=F64)
    return rewards, torch.arange(n_groups).repeat_interleave(G), mask, logp, ref_logp


def _policy_case(seed, B=10, T=6, per_token_adv=True):
    """logp (leaf), old, advantages [B, T], mask. Rows 0/1 have log-ratios 2.5 (r = 12.2 > c in {3, 10}) and
    -1.5 with A of both signs (row 0 A < 0 for the dual clip), so every clip branch is exercised."""
    g = _gen(seed)
    mask = _mask(B, T, g)
    old = -3.0 * torch.rand(B, T, generator=g, dtype=F64) - 0.05
    logr = 0.3 * torch.randn(B, T, generator=g, dtype=F64)
    logr[0], logr[1] = 2.5, -1.5
    if per_token_adv:  # OpenRLHF's advantages are per token (reward-to-go, whitening)
        adv = torch.randn(B, T, generator=g, dtype=F64)
        adv[0], adv[1] = -1.0 + 0.1 * adv[0], 1.0 + 0.1 * adv[1]
        adv[2, :3] = adv[2, :3].abs()
        adv[3, :3] = -adv[3, :3].abs()
    else:
        adv = torch.randn(B, 1, generator=g, dtype=F64).expand(B, T).clone()
        adv[0], adv[1] = -1.0, 1.0
    logp = (old + logr).requires_grad_(True)
    return logp, old, adv * mask, mask


def adv(key, batch, **hp):
    return registry.get("advantage", key).fn(batch, **hp)


def objective(key, *args, **hp):
    return registry.get("objective", key).fn(*args, **hp)


def _agg(token_level_loss):
    return "token-mean" if token_level_loss else "seq-mean-token-mean"


# ------------------------------------------------------------------------------------------ advantages

# OpenRLHF `--advantage_estimator` -> (workbench key, parameters)
GROUP_ESTIMATORS = {
    "rloo": ("rloo", {}),
    "group_norm": ("grpo", dict(scale="group", unbiased=True, eps=1e-9, eps_mode="add")),
    "dr_grpo": ("grpo", dict(scale="none")),
    "reinforce_baseline": ("reinforce_plus_plus_baseline", dict(unbiased=False, eps=1e-8)),
}


@pytest.mark.parametrize("estimator", [
    pytest.param("rloo", marks=pytest.mark.covers("rloo")),
    pytest.param("group_norm", marks=pytest.mark.covers("grpo")),
    pytest.param("dr_grpo", marks=pytest.mark.covers("dr_grpo", "grpo")),
    pytest.param("reinforce_baseline", marks=pytest.mark.covers("reinforce_plus_plus_baseline")),
])
@pytest.mark.parametrize("G", [2, 4])
def test_group_advantages_match_openrlhf(estimator, G):
    """experience_maker.py `compute_advantages_and_returns` without KL in the reward (kl_coef 0, as with
    `--use_kl_loss` or no reference model): the shaped outcome reward on the last token, reward-to-go
    (gamma forced to 1), and for reinforce_baseline the batch token whitening. Compared on the mask
    (OpenRLHF's whitening also writes the padding)."""
    rewards, group, mask, _, _ = _outcome_case(10 + G, G=G)
    theirs = ref.openrlhf_advantages(rewards, mask, G, estimator)
    key, hp = GROUP_ESTIMATORS[estimator]
    ours = adv(key, _batch(rewards, group, mask), **hp)
    assert_agree(ours, theirs * mask)
    if estimator in ("rloo", "group_norm", "dr_grpo"):
        assert float(ours[:G].abs().max()) == 0.0  # the all-equal group


@pytest.mark.covers("grpo", "rloo", "reinforce_plus_plus_baseline", "dr_grpo")
def test_singleton_groups_are_refused_like_openrlhf():
    """train_ppo_ray.py asserts n_samples_per_prompt > 1 for rloo, reinforce_baseline and group_norm; the
    workbench estimators raise on a group of one. OpenRLHF's dr_grpo has no such check and gives a group of
    one A = r - r = 0, which is workbench `grpo(scale="none", allow_singletons=True)`."""
    rewards, group, mask, _, _ = _outcome_case(20, G=1, n_groups=5)
    batch = _batch(rewards, group, mask)
    for estimator in ("rloo", "group_norm", "reinforce_baseline"):
        with pytest.raises(AssertionError, match="n_samples_per_prompt > 1"):
            ref.openrlhf_advantages(rewards, mask, 1, estimator)
        key, hp = GROUP_ESTIMATORS[estimator]
        with pytest.raises(ValueError, match="group of one"):
            adv(key, batch, **hp)
    theirs = ref.openrlhf_advantages(rewards, mask, 1, "dr_grpo")
    assert_agree(adv("grpo", batch, scale="none", allow_singletons=True), theirs * mask)


@pytest.mark.covers("reinforce_plus_plus", "kl-penalty", "k1", "k3")
@pytest.mark.parametrize("gamma", [1.0, 0.9])
@pytest.mark.parametrize("kl_estimator,beta", [(None, 0.0), ("k1", 0.05), ("k3", 0.1)])
def test_reinforce_matches_openrlhf(gamma, kl_estimator, beta):
    """OpenRLHF `reinforce`: outcome on the last token, -kl_coef * compute_approx_kl per token
    (compute_reward), discounted reward-to-go, population-variance token whitening with
    rsqrt(clamp(var, 1e-8)). Workbench: `reinforce_plus_plus(gamma, unbiased=False)` with
    `token_rewards = kl_in_reward(logp, ref, mask, beta, estimator)`. |log-ratio| < 2 here, so the +-10
    KL clamp is inactive (see test_kl_placements_with_the_openrlhf_clamp)."""
    rewards, group, mask, logp, ref_logp = _outcome_case(30)
    kl_t = ref.openrlhf_compute_approx_kl(logp, ref_logp, kl_estimator) if kl_estimator else None
    theirs = ref.openrlhf_advantages(rewards, mask, 4, "reinforce", gamma=gamma, kl=kl_t, kl_coef=beta)
    token = kl_in_reward(logp, ref_logp, mask, beta=beta, estimator=kl_estimator) if kl_estimator else None
    ours = adv("reinforce_plus_plus", _batch(rewards, group, mask, token_rewards=token), gamma=gamma,
               unbiased=False, eps=1e-8)
    assert_agree(ours, theirs * mask)
    # OpenRLHF's masked_normalize (utils.py) is the same population whitening as the inline code.
    raw = ref.openrlhf_advantages(rewards, mask, 4, "reinforce", gamma=gamma, kl=kl_t, kl_coef=beta,
                                  no_advantage_std_norm=True)
    flat_mask = mask.flatten()
    white = ref.openrlhf_masked_normalize(raw.flatten() + 0.0, flat_mask, dim=0).view_as(mask)
    torch.testing.assert_close(white * mask, ours, **TOL)


@pytest.mark.covers("reinforce_plus_plus")
def test_reinforce_reward_clip_range_is_a_clamp_of_the_outcome_reward():
    """`--reward_clip_range` (default (-10, 10)) clamps the reward handed to compute_reward. Workbench
    estimators clip nothing; for `reinforce` (no group shaping) clamping R before the batch reproduces
    OpenRLHF exactly, and without it the results differ."""
    rewards, group, mask, _, _ = _outcome_case(31)
    rewards = 8.0 * rewards - 4.0  # several beyond 10
    assert float(rewards.max()) > 10.0
    theirs = ref.openrlhf_advantages(rewards, mask, 4, "reinforce")
    ours = adv("reinforce_plus_plus", _batch(rewards.clamp(-10.0, 10.0), group, mask), unbiased=False)
    assert_agree(ours, theirs * mask)
    unclipped = adv("reinforce_plus_plus", _batch(rewards, group, mask), unbiased=False)
    assert float((unclipped - theirs * mask).abs().max()) > 1e-2


@pytest.mark.covers("kl-penalty", "k1", "rloo", "grpo", "dr_grpo", "reinforce_plus_plus_baseline")
def test_group_estimators_with_kl_in_reward_match_openrlhf():
    """KL in the reward with a group estimator (OpenRLHF default `--init_kl_coef 0.01` without
    `--use_kl_loss`). OpenRLHF shapes the OUTCOME reward by the group (rloo / group_norm / dr_grpo /
    reinforce_baseline), then adds -kl_coef * k1 per token in compute_reward and takes the reward-to-go:
    A_t = shaped(R)_i - beta * sum_{s >= t} k1_s (then whitening for reinforce_baseline): the workbench's
    `token_rewards_mode="to_go"`. The default "in_baseline" (TRL RLOO, verl `use_kl_in_reward`) sums the
    token rewards into R before the baseline, and differs."""
    rewards, group, mask, logp, ref_logp = _outcome_case(32)
    beta = 0.05
    kl_t = ref.openrlhf_compute_approx_kl(logp, ref_logp, "k1")
    token = kl_in_reward(logp, ref_logp, mask, beta=beta, estimator="k1", value_clamp=10.0)
    for estimator, (key, hp) in GROUP_ESTIMATORS.items():
        theirs = ref.openrlhf_advantages(rewards, mask, 4, estimator, kl=kl_t, kl_coef=beta) * mask
        batch = _batch(rewards, group, mask, token_rewards=token)
        assert_agree(adv(key, batch, **hp, token_rewards_mode="to_go"), theirs)
        assert not torch.allclose(adv(key, batch, **hp), theirs, **TOL), estimator  # the TRL/verl convention


# ------------------------------------------------------------------------------------------ policy loss


@pytest.mark.parametrize("token_level_loss", [
    pytest.param(True, marks=pytest.mark.covers("ppo-clip", "token-mean")),
    pytest.param(False, marks=pytest.mark.covers("ppo-clip", "seq-mean-token-mean")),
])
@pytest.mark.parametrize("eps_low,eps_high", [(0.2, 0.2), (0.2, 0.28)])
def test_ppo_clip_matches_openrlhf_policy_loss(token_level_loss, eps_low, eps_high):
    """PolicyLoss(policy_loss_type="ppo", dual_clip=None) with `--eps_clip_low_high`, per-token advantages."""
    logp, old, A, mask = _policy_case(40)
    theirs = ref.openrlhf_policy_loss(logp, old, A, mask, clip_eps_low=eps_low, clip_eps_high=eps_high,
                                      token_level_loss=token_level_loss)
    ours, _ = objective("ppo-clip", logp, old, A, mask, agg=_agg(token_level_loss), eps_low=eps_low,
                        eps_high=eps_high, logr_clamp=None)
    assert_agree(ours, theirs, logp)


@pytest.mark.covers("dual-clip", "ppo-clip", "token-mean")
@pytest.mark.parametrize("c", [3.0, 10.0])
def test_dual_clip_matches_openrlhf_policy_loss(c):
    """PolicyLoss(dual_clip=c): -where(A < 0, max(min(s1, s2), c A), min(s1, s2)). Row 0 has r = 12.2 > c
    with A < 0, so the cap is active (and its gradient is zero)."""
    logp, old, A, mask = _policy_case(41)
    theirs = ref.openrlhf_policy_loss(logp, old, A, mask, dual_clip=c)
    for key in ("dual-clip", "ppo-clip"):
        ours, m = objective(key, logp, old, A, mask, agg="token-mean", dual_clip_c=c, logr_clamp=None)
        assert_agree(ours, theirs, logp)
        assert m["clip/dual"] > 0
    with pytest.raises(AssertionError):
        ref.openrlhf_policy_loss(logp, old, A, mask, dual_clip=1.0)
    with pytest.raises(ValueError):
        objective("dual-clip", logp, old, A, mask, dual_clip_c=1.0)


@pytest.mark.covers("gspo", "seq-mean-token-mean")
@pytest.mark.parametrize("eps_low,eps_high,spread", [(3e-4, 4e-4, 1e-3), (0.2, 0.2, 0.3)])
def test_gspo_matches_openrlhf_policy_loss(eps_low, eps_high, spread):
    """PolicyLoss(policy_loss_type="gspo"): s_i = exp(sum_t m logr / sum_t m) differentiated directly,
    token_level_loss forced False. Workbench `gspo` (token form, seq-mean-token-mean) has the same value
    and gradient when the advantage is constant along each sequence (GSPO's setting). The sequence
    log-ratios are of the order of `spread`, so some sequences are clipped and some are not."""
    g = _gen(42)
    B, T = 10, 6
    mask = _mask(B, T, g)
    old = -3.0 * torch.rand(B, T, generator=g, dtype=F64) - 0.05
    logr = spread * (torch.randn(B, 1, generator=g, dtype=F64) + 0.5 * torch.randn(B, T, generator=g, dtype=F64))
    logp = (old + logr).requires_grad_(True)
    A = torch.randn(B, 1, generator=g, dtype=F64).expand(B, T) * mask
    theirs = ref.openrlhf_policy_loss(logp, old, A, mask, clip_eps_low=eps_low, clip_eps_high=eps_high,
                                      policy_loss_type="gspo", token_level_loss=True)  # forced False inside
    ours, m = objective("gspo", logp, old, A, mask, eps_low=eps_low, eps_high=eps_high)
    assert_agree(ours, theirs, logp)
    assert 0 < m["clip/region"] < 1


@pytest.mark.covers("gspo")
@pytest.mark.xfail(strict=True, reason="documented convention (workbench gspo docstring: 'With per-token "
                   "advantages the token form uses A_it'): OpenRLHF differentiates the sequence ratio, so "
                   "token t gets (s_i/|y_i|^2) sum_u A_iu [u unclipped]; the token form gives (s_i/|y_i|) A_it "
                   "[t unclipped]. Same value, different gradient when A varies along a sequence")
def test_gspo_with_per_token_advantages_differs_from_openrlhf():
    logp, old, A, mask = _policy_case(43, per_token_adv=True)
    theirs = ref.openrlhf_policy_loss(logp, old, A, mask, policy_loss_type="gspo")
    ours, _ = objective("gspo", logp, old, A, mask, eps_low=0.2, eps_high=0.2)
    torch.testing.assert_close(ours, theirs, **TOL)  # the values agree; the gradient below does not
    assert_agree(ours, theirs, logp)


@pytest.mark.parametrize("token_level_loss", [
    pytest.param(True, marks=pytest.mark.covers("value-loss", "token-mean")),
    pytest.param(False, marks=pytest.mark.covers("value-loss", "seq-mean-token-mean")),
])
@pytest.mark.parametrize("clip_eps", [0.5, None])
def test_value_loss_matches_openrlhf(token_level_loss, clip_eps):
    """ValueLoss(clip_eps) (`--value_clip`, default 0.5): 0.5 * agg(max(clipped^2, unclipped^2))."""
    g = _gen(44)
    B, T = 8, 6
    mask = _mask(B, T, g)
    old_values = torch.randn(B, T, generator=g, dtype=F64)
    values = (old_values + 0.8 * torch.randn(B, T, generator=g, dtype=F64)).requires_grad_(True)
    returns = old_values + torch.randn(B, T, generator=g, dtype=F64)
    theirs = ref.openrlhf_value_loss(values, old_values, returns, mask, clip_eps=clip_eps,
                                     token_level_loss=token_level_loss)
    ours, m = value_loss(values, old_values, returns, mask, agg=_agg(token_level_loss),
                        clip_eps=clip_eps)
    assert_agree(ours, theirs, values)
    if clip_eps is not None:
        assert m["value/clipfrac"] > 0


@pytest.mark.parametrize("token_level_loss", [
    pytest.param(True, marks=pytest.mark.covers("token-mean")),
    pytest.param(False, marks=pytest.mark.covers("seq-mean-token-mean")),
])
def test_token_level_loss_flag_is_an_aggregation_mode(token_level_loss):
    """loss.py: token_level_loss=True is masked_mean(loss, m) over the micro-batch (token-mean);
    False is masked_mean(loss, m, dim=-1).mean() (seq-mean-token-mean, every row non-empty)."""
    g = _gen(45)
    mask = _mask(7, 9, g)
    per_token = torch.randn(7, 9, generator=g, dtype=F64).requires_grad_(True)
    theirs = (ref.openrlhf_masked_mean(per_token, mask) if token_level_loss
              else ref.openrlhf_masked_mean(per_token, mask, dim=-1).mean())
    assert_agree(ops.aggregate(per_token, mask, _agg(token_level_loss)), theirs, per_token)


# ------------------------------------------------------------------------------------------------- KL


def _kl_inputs(seed):
    """logp (leaf), ref with log-ratios in (-1.5, 1.5) plus tokens beyond every +-10 clamp:
    logr = 15, -15 (k1, k2 clamped), -3 (k3 = e^3 - 4 = 16.1 > 10), 12 (k3 = 11 > 10)."""
    g = _gen(seed)
    ref_logp = -3.0 * torch.rand(5, 6, generator=g, dtype=F64) - 0.1
    logr = 1.5 * (2 * torch.rand(5, 6, generator=g, dtype=F64) - 1)
    logr[0, :4] = torch.tensor([15.0, -15.0, -3.0, 12.0], dtype=F64)
    return (ref_logp + logr).requires_grad_(True), ref_logp


@pytest.mark.parametrize("kind", [
    pytest.param("k1", marks=pytest.mark.covers("k1")),
    pytest.param("k2", marks=pytest.mark.covers("k2")),
    pytest.param("k3", marks=pytest.mark.covers("k3")),
])
def test_kl_estimators_match_compute_approx_kl(kind):
    """compute_approx_kl(kl_estimator) clamps every estimator's value to [-10, 10] (zero gradient where the
    clamp is active) and never the log-ratio: workbench `kl.estimate(kind, value_clamp=10)`."""
    logp, ref_logp = _kl_inputs(50)
    theirs = ref.openrlhf_compute_approx_kl(logp, ref_logp, kind)
    ours = kl.estimate(logp, ref_logp, kind, value_clamp=10.0)
    assert bool((theirs.detach().abs() == 10.0).any())  # the clamp is exercised
    torch.testing.assert_close(ours, theirs, **TOL)
    w = torch.rand(5, 6, generator=_gen(51), dtype=F64)
    assert_agree((ours * w).sum(), (theirs * w).sum(), logp)


@pytest.mark.covers("kl-penalty", "token-mean", "k2", "k3")
@pytest.mark.parametrize("estimator", ["k2", "k3"])
def test_kl_in_loss_matches_openrlhf_actor(estimator):
    """ppo_actor.py `--use_kl_loss`: loss += kl_ctl.value * masked_mean(compute_approx_kl(logp, ref), m);
    workbench `kl_in_loss(beta, estimator, agg="token-mean")`. |log-ratio| < 1.5: the +-10 clamp is
    inactive (see test_kl_placements_with_the_openrlhf_clamp)."""
    logp, ref_logp = _kl_inputs(52)
    logp, ref_logp, mask = logp[1:], ref_logp[1:], _mask(4, 6, _gen(53))
    theirs = ref.openrlhf_kl_loss(logp, ref_logp, mask, kl_coef=1e-3, kl_estimator=estimator)
    ours, _ = kl_in_loss(logp, ref_logp, mask, beta=1e-3, estimator=estimator, agg="token-mean")
    assert_agree(ours, theirs, logp)


@pytest.mark.covers("kl-penalty")
@pytest.mark.parametrize("placement", ["reward", "loss"])
def test_kl_placements_with_the_openrlhf_clamp(placement):
    """OpenRLHF's compute_approx_kl clamps the KL value to +-10 in both placements: `value_clamp=10`
    reproduces it; without it (TRL, verl k1/k2) large log-ratios are not clamped."""
    logp, ref_logp = _kl_inputs(54)
    mask = torch.ones_like(ref_logp)
    if placement == "reward":
        theirs = -0.05 * ref.openrlhf_compute_approx_kl(logp.detach(), ref_logp, "k1")
        assert_agree(kl_in_reward(logp, ref_logp, mask, beta=0.05, estimator="k1", value_clamp=10.0), theirs)
        assert not torch.allclose(kl_in_reward(logp, ref_logp, mask, beta=0.05, estimator="k1"), theirs)
    else:
        theirs = ref.openrlhf_kl_loss(logp, ref_logp, mask, kl_coef=1e-3, kl_estimator="k3")
        ours = kl_in_loss(logp, ref_logp, mask, beta=1e-3, estimator="k3", value_clamp=10.0)[0]
        assert_agree(ours, theirs, logp)
        assert not torch.allclose(kl_in_loss(logp, ref_logp, mask, beta=1e-3, estimator="k3")[0], theirs)


@pytest.mark.covers("kl-penalty")
def test_adaptive_kl_controller_matches_openrlhf():
    """kl_controller.py AdaptiveKLController(init_kl_coef, target, horizon) (`--kl_target`, `--kl_horizon`
    default 10000): value *= 1 + clip(current / target - 1, -0.2, 0.2) * n_steps / horizon."""
    ours = AdaptiveKLController(beta=0.01, target=0.1, horizon=10000)
    theirs = ref.OpenRLHFAdaptiveKLController(init_kl_coef=0.01, target=0.1, horizon=10000)
    for current_kl, n_steps in [(0.3, 1024), (0.01, 1024), (0.105, 512), (0.0, 256), (5.0, 4096)]:
        ours.update(current_kl, n_steps)
        theirs.update(current_kl, n_steps)
        assert ours.beta == pytest.approx(theirs.value, rel=1e-12)


# ------------------------------------------------------------------------------------------ length penalty


@pytest.mark.covers("soft-overlong")
@pytest.mark.parametrize("max_len,buffer,factor", [(20, 6, 0.7), (12, 12, 1.0), (30, 1, 2.0)])
def test_soft_overlong_matches_openrlhf_overlong_penalty(max_len, buffer, factor):
    """length_penalty.py apply_overlong_penalty (`--overlong_buffer_len C`, `--overlong_penalty_factor`,
    generate_max_len L): r += -min(|y| - (L - C), C) / C * factor when positive. Every length 0 .. L + 5."""
    lengths = torch.arange(0, max_len + 6)
    rewards = torch.randn(lengths.shape[0], generator=_gen(60), dtype=F64)
    theirs = ref.openrlhf_overlong_penalty(rewards, lengths, max_len, buffer, factor)
    ours = soft_overlong(rewards, lengths, max_len=max_len, buffer=buffer, factor=factor)
    assert_agree(ours, theirs)


@pytest.mark.covers("soft-overlong", "grpo")
def test_overlong_penalty_then_group_norm_matches_openrlhf():
    """The OpenRLHF order: the overlong penalty on the raw reward, then group_norm; workbench
    soft_overlong -> grpo(Bessel, +1e-9), with |y| taken from the mask."""
    rewards, group, mask, _, _ = _outcome_case(61, T=12)
    lengths = mask.sum(-1).long()
    theirs = ref.openrlhf_advantages(ref.openrlhf_overlong_penalty(rewards, lengths, 12, 5, 1.0), mask, 4,
                                     "group_norm")
    shaped = soft_overlong(rewards, lengths, max_len=12, buffer=5)
    ours = adv("grpo", _batch(shaped, group, mask), eps=1e-9)
    assert_agree(ours, theirs * mask)


# ------------------------------------------------------------------------------------ SAPO -> hard clip


def _per_token_weights(key, r, A, **hp):
    """w = d(-loss)/d logp per token for ratios r [T] and one advantage per row A [B] (loss = sum of the
    per-token losses), and the ratios as the objective sees them."""
    old = torch.full((A.shape[0], r.shape[0]), -1.0, dtype=F64)
    logp = (old + torch.log(r)[None, :]).requires_grad_(True)
    mask = torch.ones_like(old)
    loss, _ = objective(key, logp, old, A[:, None] * mask, mask, agg="seq-mean-token-sum",
                        denom=ops.Denominators(num_seqs=1.0), **hp)
    (grad,) = torch.autograd.grad(loss, logp)
    return -grad, torch.exp(logp.detach() - old)


@pytest.mark.covers("sapo")
def test_sapo_gradient_tends_to_a_hard_gate_as_tau_grows():
    r"""SAPO -> hard clip, in this precise sense: the per-token gradient weight
    w_tau(r) = d(-l)/d logp = A r f'_tau(r) = A r / cosh^2(tau (r - 1) / 2) converges POINTWISE to
    A * 1[r = 1] as tau -> infinity, uniformly on {|r - 1| >= delta}:

        w_tau(1) = A for every tau                                   (the on-policy gradient, as PPO-clip)
        |w_tau(r)| <= 4 |A| r exp(-tau |r - 1|) <= 4 |A| r exp(-tau delta)   for |r - 1| >= delta
        and the rate is exactly exp(-tau delta): |w_tau(1 - delta)| exp(tau delta) / (4 |A| (1 - delta))
        = (1 + exp(-tau delta))^-2 -> 1.

    So large tau gives zero gradient on PPO-clip's zero-gradient region (A > 0, r >= 1 + delta;
    A < 0, r <= 1 - delta, for any eps < delta), but ALSO where PPO-clip keeps the gradient A r (A > 0, r <= 1 - delta;
    A < 0, r >= 1 + delta): the limit is a two-sided gate whose width shrinks like 1/tau, not PPO-clip's
    one-sided clip; and it is a statement about gradients only (the loss value f_tau(r) A = (4/tau)
    sigma(tau (r - 1)) A tends to 0 everywhere). tau_pos = tau_neg = tau; ratios in [0.2, 3], delta = 0.05.
    (For tau (r - 1) > 0, float64 computes 1 - sigma with an absolute error ~1e-16, so the bounds are checked
    up to 4 |A| r 1e-15; sigma saturates to exactly 1 past tau (r - 1) ~ 37, where autograd returns w = 0.)"""
    delta = 0.05
    r = torch.cat([torch.linspace(0.2, 1 - delta, 9, dtype=F64), torch.ones(1, dtype=F64),
                   torch.linspace(1 + delta, 3.0, 9, dtype=F64)])
    A = torch.tensor([1.3, -0.4], dtype=F64)
    at_one = torch.zeros(r.shape[0], dtype=torch.bool)
    at_one[9] = True
    # PPO-clip with eps = delta / 2, so every grid ratio with |r - 1| >= delta is strictly out of its band
    w_ppo, _ = _per_token_weights("ppo-clip", r, A, eps_low=delta / 2, eps_high=delta / 2, logr_clamp=None)
    ppo_zero = ((A[:, None] > 0) & (r[None, :] >= 1 + delta)) | ((A[:, None] < 0) & (r[None, :] <= 1 - delta))
    ppo_kept = ~ppo_zero & ~at_one[None, :]  # out of the band on the side PPO-clip does not clip
    assert torch.all(w_ppo[ppo_zero] == 0) and torch.all(w_ppo[ppo_kept].abs() > 0.05)
    torch.testing.assert_close(w_ppo[:, 9], A, rtol=0, atol=1e-12)

    far = ~at_one[None, :].expand(2, -1)
    for tau in (1.0, 4.0, 16.0, 64.0, 256.0, 1024.0):
        w, r_seen = _per_token_weights("sapo", r, A, tau_pos=tau, tau_neg=tau)
        x = tau * (r_seen - 1)
        torch.testing.assert_close(w[:, 9], A, rtol=0, atol=1e-12)  # r = 1: the on-policy gradient A
        exact = A[:, None] * r_seen / torch.cosh(x / 2) ** 2
        moderate = x.abs() <= 20  # where 1 - sigma is representable to better than 1e-7 relative
        torch.testing.assert_close(w[moderate], exact[moderate], rtol=1e-6, atol=1e-300)
        # the bounds, up to float64's absolute error in 1 - sigma(x) (~1e-16) for x > 0
        slack = 4 * A.abs()[:, None] * r_seen * 1e-15
        bound = 4 * A.abs()[:, None] * r_seen * torch.exp(-x.abs())
        assert torch.all(w[far].abs() <= bound[far] + slack[far])
        assert torch.all(w[far].abs() <= (4 * A.abs()[:, None] * r_seen * math.exp(-tau * delta) + slack)[far])
        # the decay is exactly exp(-tau delta) at the band edge r = 1 - delta (column 8)
        rate = w[:, 8].abs() * torch.exp(x[:, 8].abs()) / (4 * A.abs() * r_seen[:, 8])
        torch.testing.assert_close(rate, (1 + torch.exp(-x[:, 8].abs())) ** -2, rtol=1e-9, atol=0)
    # tau = 1024: tau delta = 51, every weight off r = 1 is below 1e-15 on both of PPO-clip's regions
    assert float(w[ppo_zero].abs().max()) < 1e-15 and float(w[ppo_kept].abs().max()) < 1e-15
    assert float(rate.min()) == pytest.approx(1.0, abs=1e-12)
