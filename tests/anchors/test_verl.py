"""Agreement with verl (`verl.trainer.ppo.core_algos`, verl 0.9.1): value AND gradient, float64, 1e-6.

Each test builds random inputs, calls verl's own function (imported, not transcribed) and the workbench
component with its parameters set to verl's conventions:

    advantages   Bessel std, eps 1e-6 (grpo); whitening Bessel var, rsqrt(var + 1e-8) (gae, reinforce++)
    policy loss  log-ratio clamped to +-20 (vanilla, cispo, sapo), max 10 on the GSPO token log-ratio,
                 no clamp in geo_mean; dual clip always on in `vanilla` (clip_ratio_c, default 3)
    KL           k1/k2/abs unclamped; low_var_kl (k3): log-ratio clamp 20, value clamp 10
    aggregation  seq-mean-token-sum-norm divides by (#non-empty rows) x loss_scale_factor, whose
                 default is the padded response length of the micro-batch (see test_agg_loss_matches_verl)

verl masks its denominators with +1e-8 (masked_mean, seq-mean-token-mean); that shifts values by a
relative 1e-8 / N, far inside the tolerance.
"""
from __future__ import annotations

import pytest
import torch

from tests.helpers import AGREE_TOL, anchor_mask as _mask, assert_agree, seeded as _gen, batch_with_mask

# Skips (naming the missing module: verl itself, or one of its import deps such as ray) when the anchor is
# absent; `make install` installs it (pip install --no-deps verl==0.9.1 plus its pinned import deps).
core_algos = pytest.importorskip("verl.trainer.ppo.core_algos")

from verl.trainer.config import AlgoConfig  # noqa: E402
from verl.trainer.ppo import rollout_corr_helper  # noqa: E402
from verl.utils import torch_functional as verl_F  # noqa: E402
from verl.workers.config import ActorConfig  # noqa: E402
from verl.workers.config.actor import PolicyLossConfig  # noqa: E402

from workbench import kl, ops, registry  # noqa: E402
from workbench.advantages.gae import gae_returns  # noqa: E402
from workbench.controllers import AdaptiveKLController  # noqa: E402
from workbench.values import value_loss  # noqa: E402
from workbench.regularizers.entropy import entropy_bonus  # noqa: E402
from workbench.regularizers.kl_penalty import kl_in_reward  # noqa: E402

F64 = torch.float64
TOL = AGREE_TOL
AGG_MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")


# ---------------------------------------------------------------------------------------------- inputs


_batch = batch_with_mask


def _outcome_case(seed, G=4, n_groups=3, T=7, holes=False, dense=True, equal_group=True):
    """Batch with outcome rewards (one all-equal group) plus optional dense per-token rewards, and the
    same rewards as verl's `token_level_rewards` (outcome on the last valid token + dense * mask)."""
    g = _gen(seed)
    B = G * n_groups
    group = torch.arange(n_groups).repeat_interleave(G)
    rewards = torch.randint(0, 3, (B,), generator=g).to(F64) + 0.25 * torch.randn(B, generator=g, dtype=F64)
    if equal_group:
        rewards[:G] = 1.0
    mask = _mask(B, T, g, holes)
    token = 0.1 * torch.randn(B, T, generator=g, dtype=F64) if dense else None
    batch = _batch(rewards, group, mask, token_rewards=token)
    last = torch.zeros(B, T, dtype=F64)
    last_idx = (mask * torch.arange(1, T + 1)).argmax(-1)  # the last valid position of each row
    last[torch.arange(B), last_idx] = rewards
    tlr = last + (token * mask if token is not None else 0.0)
    return batch, tlr, group.numpy()


def _policy_case(seed, B=10, T=6, extreme=True):
    """logp (leaf, requires grad), old, ref, per-sequence advantages broadcast over the mask.

    Rows 0/1 have ratios far outside the band (r = e^2.5 > clip_ratio_c in {3, 10}, and e^-1.5), with A of
    both signs, so the clip, clip-higher and dual-clip branches are all exercised; `extreme` adds
    |log r| = 25 tokens to exercise the +-20 log-ratio clamp.
    """
    g = _gen(seed)
    mask = _mask(B, T, g)
    old = -3.0 * torch.rand(B, T, generator=g, dtype=F64) - 0.05
    logr = 0.3 * torch.randn(B, T, generator=g, dtype=F64)
    logr[0], logr[1] = 2.5, -1.5
    if extreme:
        logr[2, 0], logr[3, 0] = 25.0, -25.0
    adv_seq = torch.randn(B, generator=g, dtype=F64)
    adv_seq[0], adv_seq[1], adv_seq[2], adv_seq[3] = -1.0, 1.0, 0.7, -0.7
    adv_seq[4:6] = adv_seq[4:6].abs() * torch.tensor([1.0, -1.0], dtype=F64)
    adv = adv_seq[:, None] * mask
    logp = (old + logr).requires_grad_(True)
    ref = old + 0.5 * torch.randn(B, T, generator=g, dtype=F64)
    return logp, old, ref, adv, mask


def _actor(**kw) -> ActorConfig:
    return ActorConfig(strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=1, **kw)


def _norm_constant(mask, loss_scale_factor=None):
    """verl 0.9.1 `agg_loss("seq-mean-token-sum-norm")`: sum / global_batch_size / loss_scale_factor with
    global_batch_size = #rows with a valid token and loss_scale_factor defaulting to mask.shape[-1]."""
    n_seqs = float((mask.sum(-1) > 0).sum())
    return n_seqs * (mask.shape[-1] if loss_scale_factor is None else loss_scale_factor)


def _denom(mode, mask):
    return ops.Denominators(norm_constant=_norm_constant(mask)) if mode == "seq-mean-token-sum-norm" else None


def adv(key, batch, **hp):
    return registry.get("advantage", key).fn(batch, **hp)


def objective(key, *args, **hp):
    return registry.get("objective", key).fn(*args, **hp)


# ------------------------------------------------------------------------------------------ advantages


@pytest.mark.covers("grpo")
@pytest.mark.parametrize("holes,dense", [(False, False), (True, True)])
def test_grpo_advantage_matches_verl(holes, dense):
    """Outcome rewards (+ dense per-token rewards, which both sum per sequence first)."""
    batch, tlr, index = _outcome_case(0, holes=holes, dense=dense)
    theirs, _ = core_algos.compute_grpo_outcome_advantage(tlr, batch.mask, index, epsilon=1e-6,
                                                          norm_adv_by_std_in_grpo=True)
    ours = adv("grpo", batch, scale="group", unbiased=True, eps=1e-6, eps_mode="add")
    assert_agree(ours, theirs)
    if not dense:
        assert float(ours[:4].abs().max()) == 0.0  # the all-equal group


@pytest.mark.covers("dr_grpo", "grpo")
def test_dr_grpo_advantage_matches_verl_without_std():
    batch, tlr, index = _outcome_case(1)
    theirs, _ = core_algos.compute_grpo_outcome_advantage(tlr, batch.mask, index, norm_adv_by_std_in_grpo=False)
    assert_agree(adv("grpo", batch, scale="none"), theirs)


@pytest.mark.covers("grpo")
def test_grpo_vectorized_matches_verl_in_float32():
    """verl's `grpo_vectorized` computes group statistics in float32 (`verl.utils.groupwise.group_mean_std`),
    and passes eps=0.0 to its variance floor, so it is the plain form std + 1e-6 (not eps_mode floor_add):
    agreement at float32 precision."""
    batch, tlr, index = _outcome_case(2)
    theirs, _ = core_algos.compute_grpo_vectorized_outcome_advantage(tlr, batch.mask, index, epsilon=1e-6)
    assert_agree(adv("grpo", batch, eps=1e-6), theirs, rtol=1e-5, atol=1e-5)


@pytest.mark.covers("grpo", "rloo")
@pytest.mark.parametrize("norm", [True, False])
def test_singleton_groups_keep_their_reward_as_verl_with_allow_singletons_keep(norm):
    """verl gives a group of one mean 0 and std 1 (A = R / (1 + eps)); workbench refuses singletons by default,
    gives them A = 0 with allow_singletons=True, and verl's A = R with allow_singletons="keep". Mixed with
    groups of several, so both kinds of rows are checked."""
    batch, tlr, index = _outcome_case(3, G=1, n_groups=4, equal_group=False)
    theirs, _ = core_algos.compute_grpo_outcome_advantage(tlr, batch.mask, index, norm_adv_by_std_in_grpo=norm)
    scale = "group" if norm else "none"
    assert_agree(adv("grpo", batch, allow_singletons="keep", scale=scale), theirs)
    assert not torch.allclose(adv("grpo", batch, allow_singletons=True, scale=scale), theirs.to(F64))
    one = torch.tensor([0, 1, 1, 2])  # groups of one (0, 2) beside a group of two
    batch.group = one
    theirs, _ = core_algos.compute_grpo_outcome_advantage(tlr, batch.mask, one.numpy(), norm_adv_by_std_in_grpo=norm)
    assert_agree(adv("grpo", batch, allow_singletons="keep", scale=scale), theirs)
    theirs, _ = core_algos.compute_rloo_outcome_advantage(tlr, batch.mask, one.numpy())
    assert_agree(adv("rloo", batch, allow_singletons="keep"), theirs)
    with pytest.raises(ValueError, match="allow_singletons must be one of"):
        adv("grpo", batch, allow_singletons="yes")


# every workbench estimator verl also has that takes allow_singletons, with verl's function and our matching settings
SINGLETON_CASES = [("grpo", "compute_grpo_outcome_advantage", {}),
                   ("grpo", "compute_grpo_outcome_advantage", {"scale": "none"}),
                   ("rloo", "compute_rloo_outcome_advantage", {}),
                   ("opo", "compute_opo_outcome_advantage", {}),
                   ("gpg", "compute_gpg_outcome_advantage", {"alpha_mode": "verl"}),
                   ("reinforce_plus_plus_baseline", "compute_reinforce_plus_plus_baseline_outcome_advantage", {})]


@pytest.mark.covers("grpo", "dr_grpo", "rloo", "opo", "gpg", "reinforce_plus_plus_baseline")
@pytest.mark.parametrize("key,fn,hp", SINGLETON_CASES)
def test_every_allow_singletons_value_does_what_it_says_against_verl(key, fn, hp):
    """Groups of one (rows 0 and 3) beside a group of two, dense token rewards included: "keep" is verl's rule
    (baseline 0, std 1), False refuses with the fix, True zeroes the singleton rows (reinforce++-baseline: before
    its whitening, i.e. verl's rule on rewards of 0 in those rows)."""
    batch, tlr, _ = _outcome_case(12, G=1, n_groups=4, equal_group=False)
    batch.group = torch.tensor([0, 1, 1, 2])
    if fn == "compute_grpo_outcome_advantage":
        theirs, _ = core_algos.compute_grpo_outcome_advantage(tlr, batch.mask, batch.group.numpy(),
                                                              norm_adv_by_std_in_grpo=hp.get("scale") != "none")
    else:
        theirs, _ = getattr(core_algos, fn)(tlr, batch.mask, batch.group.numpy())
    assert_agree(adv(key, batch, allow_singletons="keep", **hp), theirs)
    with pytest.raises(ValueError, match=r"group of one \(rows \[0, 3\]\).*allow_singletons=True"):
        adv(key, batch, **hp)
    zeroed = adv(key, batch, allow_singletons=True, **hp)
    if key == "reinforce_plus_plus_baseline":
        silenced = tlr * torch.tensor([0.0, 1.0, 1.0, 0.0], dtype=F64)[:, None]
        assert_agree(zeroed, getattr(core_algos, fn)(silenced, batch.mask, batch.group.numpy())[0])
    else:
        assert torch.equal(zeroed[[0, 3]], torch.zeros_like(zeroed[[0, 3]]))
        assert_agree(zeroed[1:3], theirs[1:3])


@pytest.mark.covers("rloo")
@pytest.mark.parametrize("fn", ["compute_rloo_outcome_advantage", "compute_rloo_vectorized_outcome_advantage"])
def test_rloo_advantage_matches_verl(fn):
    batch, tlr, index = _outcome_case(4)
    theirs, _ = getattr(core_algos, fn)(tlr, batch.mask, index)
    assert_agree(adv("rloo", batch), theirs)


@pytest.mark.covers("reinforce_plus_plus")
@pytest.mark.parametrize("gamma", [1.0, 0.9])
@pytest.mark.parametrize("holes", [False, True])
def test_reinforce_plus_plus_matches_verl(gamma, holes):
    batch, tlr, _ = _outcome_case(5, holes=holes)
    theirs, _ = core_algos.compute_reinforce_plus_plus_outcome_advantage(tlr, batch.mask,
                                                                         config=AlgoConfig(gamma=gamma))
    assert_agree(adv("reinforce_plus_plus", batch, gamma=gamma, unbiased=True, eps=1e-8), theirs)


@pytest.mark.covers("reinforce_plus_plus_baseline")
@pytest.mark.parametrize("holes", [False, True])
def test_reinforce_plus_plus_baseline_matches_verl(holes):
    batch, tlr, index = _outcome_case(6, holes=holes)
    theirs, _ = core_algos.compute_reinforce_plus_plus_baseline_outcome_advantage(tlr, batch.mask, index)
    assert_agree(adv("reinforce_plus_plus_baseline", batch, unbiased=True, eps=1e-8), theirs)


@pytest.mark.covers("remax")
@pytest.mark.parametrize("holes", [False, True])
def test_remax_matches_verl(holes):
    """Compared on the mask: with observation holes verl leaves the reward-to-go on masked positions
    (never used by the loss); workbench zeroes them."""
    batch, tlr, _ = _outcome_case(7, holes=holes)
    batch.baseline_rewards = torch.randn(batch.size, generator=_gen(70), dtype=F64)
    theirs, _ = core_algos.compute_remax_outcome_advantage(tlr, batch.baseline_rewards, batch.mask)
    assert_agree(adv("remax", batch), theirs * batch.mask)


@pytest.mark.parametrize("norm_by_std", [True, False])
def test_grpo_passk_matches_verl(norm_by_std):
    from workbench.advantages.group import grpo_passk

    batch, tlr, index = _outcome_case(11, equal_group=False)
    config = AlgoConfig(norm_adv_by_std_in_grpo=norm_by_std)
    theirs, _ = core_algos.compute_grpo_passk_outcome_advantage(tlr, batch.mask, index, config=config)
    assert_agree(grpo_passk(batch, norm_by_std=norm_by_std), theirs)


@pytest.mark.covers("opo")
def test_opo_matches_verl():
    batch, tlr, index = _outcome_case(8)
    theirs, _ = core_algos.compute_opo_outcome_advantage(tlr, batch.mask, index)
    assert_agree(adv("opo", batch), theirs)


@pytest.mark.covers("gpg")
def test_gpg_advantage_matches_verl_alpha():
    """verl rescales by alpha = B / count_nonzero(scores) (nonzero rewards): workbench alpha_mode="verl".
    The workbench default alpha_mode="paper" (B / (B - M), M = rows of all-equal groups) is the paper's
    reading and differs by design (documented in `workbench.advantages.baselines.gpg`)."""
    batch, tlr, index = _outcome_case(9, dense=False)
    batch.rewards[[5, 9]] = 0.0
    tlr = tlr * (batch.rewards != 0)[:, None]
    theirs, _ = core_algos.compute_gpg_outcome_advantage(tlr, batch.mask, index)
    assert_agree(adv("gpg", batch, alpha_mode="verl"), theirs)


@pytest.mark.covers("gae")
@pytest.mark.parametrize("gamma,lam", [(1.0, 1.0), (1.0, 0.95), (0.99, 0.9)])
@pytest.mark.parametrize("holes", [False, True])
def test_gae_matches_verl(gamma, lam, holes):
    """Advantages (whitened) and returns, on the mask: verl whitens the full tensor without re-masking and
    returns A + V on padded positions; neither reaches the loss."""
    batch, tlr, _ = _outcome_case(10, holes=holes)
    batch.values = torch.randn(batch.mask.shape, generator=_gen(100), dtype=F64)
    theirs_adv, theirs_ret = core_algos.compute_gae_advantage_return(tlr, batch.values, batch.mask, gamma, lam)
    assert_agree(adv("gae", batch, gamma=gamma, lam=lam, whiten=True), theirs_adv * batch.mask)
    assert_agree(gae_returns(batch, gamma=gamma, lam=lam), theirs_ret * batch.mask)


@pytest.mark.covers("value-loss")
@pytest.mark.parametrize("mode", AGG_MODES)
def test_value_loss_matches_verl(mode):
    g = _gen(11)
    mask = _mask(9, 6, g)
    old_values, returns = torch.randn(2, 9, 6, generator=g, dtype=F64)
    values = (old_values + 0.4 * torch.randn(9, 6, generator=g, dtype=F64)).requires_grad_(True)
    theirs, their_clipfrac = core_algos.compute_value_loss(values, returns, old_values, mask, cliprange_value=0.2,
                                                           loss_agg_mode=mode)
    ours, metrics = value_loss(values, old_values, returns, mask, agg=mode, denom=_denom(mode, mask),
                              clip_eps=0.2)
    assert_agree(ours, theirs, values)
    assert metrics["value/clipfrac"] == pytest.approx(float(their_clipfrac), abs=1e-6)


# --------------------------------------------------------------------------------------- policy losses


@pytest.mark.covers("ppo-clip", "dual-clip")
@pytest.mark.parametrize("eps_low,eps_high,c", [(0.2, 0.2, 3.0), (0.2, 0.28, 3.0), (0.1, 0.3, 10.0)])
@pytest.mark.parametrize("mode", AGG_MODES)
def test_vanilla_policy_loss_matches_verl(eps_low, eps_high, c, mode):
    """verl `vanilla` (from its policy-loss registry) = workbench ppo-clip with dual_clip_c = clip_ratio_c
    (verl always applies the dual clip) and logr_clamp = 20; (0.2, 0.28) is clip-higher."""
    logp, old, _, A, mask = _policy_case(12)
    cfg = _actor(clip_ratio=eps_low, clip_ratio_low=eps_low, clip_ratio_high=eps_high, clip_ratio_c=c)
    theirs, their_m = core_algos.get_policy_loss_fn("vanilla")(old, logp, A, mask, loss_agg_mode=mode, config=cfg)
    ours, m = objective("ppo-clip", logp, old, A, mask, agg=mode, denom=_denom(mode, mask), eps_low=eps_low,
                        eps_high=eps_high, dual_clip_c=c, logr_clamp=20.0)
    assert_agree(ours, theirs, logp)
    # verl pg_clipfrac = the active-clip fraction (clipped branch selected, either side) = clip/region;
    # pg_clipfrac_lower = dual-clip active on A < 0 = clip/dual; ppo_kl = mean(old - logp) = kl/k1_old.
    assert m["clip/region"] == pytest.approx(their_m["actor/pg_clipfrac"], abs=1e-6)
    assert m["clip/dual"] == pytest.approx(their_m["actor/pg_clipfrac_lower"], abs=1e-6)
    assert m["kl/k1_old"] == pytest.approx(their_m["actor/ppo_kl"], abs=1e-6)
    assert m["clip/dual"] > 0 and m["clip/high"] > 0 and m["clip/low"] > 0  # every branch was exercised


@pytest.mark.covers("gspo")
@pytest.mark.parametrize("eps_low,eps_high", [(3e-4, 4e-4), (0.05, 0.08)])
@pytest.mark.parametrize("mode", ["seq-mean-token-mean", "token-mean"])
def test_gspo_matches_verl(eps_low, eps_high, mode):
    """verl clamps the token-form log-ratio at max 10 and not below (logr_clamp=10, upper_clamp_only=True), and
    takes any aggregation (its actor default is token-mean). Row 1's mean log-ratio is -12 (A > 0, unclipped
    branch): a symmetric clamp would change its value and zero its gradient."""
    logp, old, _, A, mask = _policy_case(13, extreme=False)
    with torch.no_grad():
        logp[1] = old[1] - 12.0
    cfg = _actor(clip_ratio_low=eps_low, clip_ratio_high=eps_high)
    theirs, _ = core_algos.get_policy_loss_fn("gspo")(old, logp, A, mask, loss_agg_mode=mode, config=cfg)
    ours, _ = objective("gspo", logp, old, A, mask, agg=mode, eps_low=eps_low, eps_high=eps_high, logr_clamp=10.0,
                        upper_clamp_only=True)
    assert_agree(ours, theirs, logp)
    symmetric, _ = objective("gspo", logp, old, A, mask, agg=mode, eps_low=eps_low, eps_high=eps_high,
                             logr_clamp=10.0)
    assert symmetric.item() != pytest.approx(theirs.item(), rel=1e-9, abs=1e-12)


@pytest.mark.covers("sapo")
@pytest.mark.parametrize("tau_pos,tau_neg", [(1.0, 1.05), (0.5, 2.0)])
def test_sapo_matches_verl(tau_pos, tau_neg):
    logp, old, _, A, mask = _policy_case(14)
    cfg = _actor(tau_pos=tau_pos, tau_neg=tau_neg)
    theirs, _ = core_algos.get_policy_loss_fn("sapo")(old, logp, A, mask, config=cfg)
    ours, _ = objective("sapo", logp, old, A, mask, agg="seq-mean-token-mean", tau_pos=tau_pos, tau_neg=tau_neg,
                        logr_clamp=20.0)
    assert_agree(ours, theirs, logp)


@pytest.mark.covers("geo_mean")
@pytest.mark.parametrize("eps_low,eps_high", [(0.4, 0.4), (0.2, 0.3)])
def test_geo_mean_matches_verl(eps_low, eps_high):
    logp, old, _, A, mask = _policy_case(15, extreme=False)
    cfg = _actor(clip_ratio_low=eps_low, clip_ratio_high=eps_high)
    theirs, _ = core_algos.get_policy_loss_fn("geo_mean")(old, logp, A, mask, config=cfg)
    ours, _ = objective("geo_mean", logp, old, A, mask, eps_low=eps_low, eps_high=eps_high)
    assert_agree(ours, theirs, logp)


@pytest.mark.covers("geo_mean", "seq-mean-token-mean")
def test_geo_mean_empty_rows_count_with_verl_denominator():
    """verl's geo_mean averages with torch.mean over all rows, empty ones included (their loss is 0);
    workbench averages over non-empty rows by default, and Denominators(num_seqs=B) reproduces verl."""
    logp, old, _, A, mask = _policy_case(16, extreme=False)
    mask = mask.clone()
    mask[-2:] = 0.0
    A = A * mask
    theirs, _ = core_algos.get_policy_loss_fn("geo_mean")(old, logp, A, mask, config=_actor())
    ours, _ = objective("geo_mean", logp, old, A, mask, eps_low=0.2, eps_high=0.2,
                        denom=ops.Denominators(num_seqs=float(mask.shape[0])))
    assert_agree(ours, theirs, logp)


@pytest.mark.covers("cispo")
@pytest.mark.parametrize("eps_low,eps_high", [(0.2, 0.28), (1.0, 4.0)])
@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean"])
def test_cispo_matches_verl(eps_low, eps_high, mode):
    """verl `cispo`: w = clip(r, 1 - eps_low, 1 + eps_high), the relative convention (cap_abs=None)."""
    logp, old, _, A, mask = _policy_case(17)
    cfg = _actor(clip_ratio_low=eps_low, clip_ratio_high=eps_high)
    theirs, their_m = core_algos.get_policy_loss_fn("cispo")(old, logp, A, mask, loss_agg_mode=mode, config=cfg)
    ours, m = objective("cispo", logp, old, A, mask, agg=mode, cap_abs=None, eps_low=eps_low, eps_high=eps_high,
                        logr_clamp=20.0)
    assert_agree(ours, theirs, logp)
    assert m["clip/out_of_band"] == pytest.approx(their_m["actor/pg_clipfrac"], abs=1e-6)


@pytest.mark.covers("gpg")
@pytest.mark.parametrize("mode", AGG_MODES)
def test_gpg_policy_loss_matches_verl(mode):
    logp, old, _, A, mask = _policy_case(18)
    theirs, _ = core_algos.get_policy_loss_fn("gpg")(old, logp, A, mask, loss_agg_mode=mode, config=_actor())
    ours, _ = objective("gpg", logp, old, A, mask, agg=mode, denom=_denom(mode, mask))
    assert_agree(ours, theirs, logp)


@pytest.mark.covers("kl_cov")
@pytest.mark.parametrize("ratio,coef", [(0.1, 1.0), (0.3, 0.1)])
def test_kl_cov_matches_verl(ratio, coef):
    logp, old, _, A, mask = _policy_case(19, extreme=False)
    cfg = _actor(policy_loss=PolicyLossConfig(loss_mode="kl_cov", kl_cov_ratio=ratio, ppo_kl_coef=coef))
    theirs, _ = core_algos.get_policy_loss_fn("kl_cov")(old, logp, A, mask, config=cfg)
    ours, _ = objective("kl_cov", logp, old, A, mask, kl_cov_ratio=ratio, ppo_kl_coef=coef)
    assert_agree(ours, theirs, logp)


def _clip_cov_case(seed, B=16, T=12):
    """Per-token advantages (std 2) and old log-probs spread over [-4, 0], ratios near 1 (a few outside the band):
    many tokens have lb = 1 < cov_t < ub = 5, the candidates."""
    g = _gen(seed)
    mask = _mask(B, T, g)
    old = -4.0 * torch.rand(B, T, generator=g, dtype=F64)
    logp = (old + 0.15 * torch.randn(B, T, generator=g, dtype=F64)).requires_grad_(True)
    A = 2.0 * torch.randn(B, T, generator=g, dtype=F64) * mask
    return logp, old, A, mask


@pytest.mark.covers("clip_cov")
@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean"])
@pytest.mark.parametrize("ratio,deterministic", [(0.02, False), (0.1, False), (1.0, True)])
def test_clip_cov_matches_verl(ratio, deterministic, mode):
    """verl picks min(k, #candidates) of the candidates with the global `torch.randperm`; ours with
    `torch.randperm(generator=g)`. Seeding the global generator and ours with the same seed gives the same
    permutation, so the same tokens are detached (ratio 0.02, 0.1: 1 and 9 picks of 12 candidates, a random subset).
    With ratio 1, k = N >= #candidates: every candidate is detached whatever the permutation (deterministic).
    Compared: the loss and its gradient, pg_clipfrac (our clip_cov/detached_frac) and ppo_kl (kl/k1_old)."""
    logp, old, A, mask = _clip_cov_case(20)
    cfg = _actor(clip_ratio=0.2, loss_agg_mode=mode,
                 policy_loss=PolicyLossConfig(loss_mode="clip_cov", clip_cov_ratio=ratio, clip_cov_lb=1.0,
                                              clip_cov_ub=5.0))
    with torch.random.fork_rng():
        torch.manual_seed(7)
        theirs, their_metrics = core_algos.get_policy_loss_fn("clip_cov")(old, logp, A, mask, loss_agg_mode=mode,
                                                                         config=cfg)
    generator = None if deterministic else torch.Generator().manual_seed(7)
    seed = 12345 if deterministic else 0  # unused with a generator; any seed when every candidate goes
    ours, metrics = objective("clip_cov", logp, old, A, mask, agg=mode, clip_cov_ratio=ratio, clip_cov_lb=1.0,
                              clip_cov_ub=5.0, generator=generator, seed=seed)
    assert_agree(ours, theirs, logp)
    assert metrics["clip_cov/detached_frac"] == pytest.approx(their_metrics["actor/pg_clipfrac"], abs=1e-7)
    assert metrics["kl/k1_old"] == pytest.approx(their_metrics["actor/ppo_kl"], rel=1e-6)
    k = max(int(ratio * float(mask.sum())), 1)
    candidates = metrics["clip_cov/candidate_frac"] * float(mask.sum())
    assert metrics["clip_cov/detached"] == min(k, round(candidates)) > 0
    assert (k >= candidates) if deterministic else (k < candidates)  # the case is what its name says


@pytest.mark.covers("tis")
@pytest.mark.parametrize("level,threshold,mode,low", [
    ("token", 2.0, "token_truncate", None),
    ("sequence", 1.5, "sequence_truncate", None),
    ("token", "0.8_1.25", "token_mask", 0.8),
    ("sequence", "0.5_2.0", "sequence_mask", 0.5),
])
def test_tis_matches_verl_rollout_correction(level, threshold, mode, low):
    """verl computes the weights with `rollout_corr_helper.compute_rollout_correction_weights` (a float
    threshold truncates, "lower_upper" is the IcePop band) and multiplies the `vanilla` per-token loss by
    them; workbench `tis` = ppo-clip x sg(w) (dual clip and the +-20 clamp set as in vanilla)."""
    logp, old, _, A, mask = _policy_case(20, extreme=False)
    mu = old + 0.15 * torch.randn(old.shape, generator=_gen(200), dtype=F64)
    w, _ = rollout_corr_helper.compute_rollout_correction_weights(old - mu, mask, rollout_is=level,
                                                                   rollout_is_threshold=threshold)
    theirs, _ = core_algos.get_policy_loss_fn("vanilla")(old, logp, A, mask, config=_actor(), rollout_is_weights=w)
    cap = float(str(threshold).split("_")[-1])
    ours, m = objective("tis", logp, old, A, mask, mu_logp=mu, mode=mode, cap=cap, low=low, dual_clip_c=3.0,
                        logr_clamp=20.0)
    assert_agree(ours, theirs, logp)
    assert 0 < m["tis/mean_weight"]


# ------------------------------------------------------------------------------------------ aggregation


@pytest.mark.covers("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")
@pytest.mark.parametrize("mode", AGG_MODES)
def test_agg_loss_matches_verl(mode):
    """verl 0.9.1 `agg_loss`, local (dp_size=1) form, with an empty row in the batch.

    seq-mean-token-sum-norm: verl 0.9.1 computes sum / global_batch_size / loss_scale_factor with
    global_batch_size = #non-empty rows and loss_scale_factor = None -> mask.shape[-1] (the padded length of
    this micro-batch), i.e. C = B_nonempty * T_pad. (The catalog's note that verl does not divide by B,
    verl#3741, describes older releases.) C still changes with each micro-batch's padding unless
    `actor.loss_scale_factor` is set; workbench takes C explicitly: Denominators(norm_constant=C).
    """
    g = _gen(21)
    mask = _mask(7, 5, g)
    mask[3] = 0.0
    loss_mat = torch.randn(7, 5, generator=g, dtype=F64).requires_grad_(True)
    theirs = core_algos.agg_loss(loss_mat, mask, mode)
    assert_agree(ops.aggregate(loss_mat, mask, mode, _denom(mode, mask)), theirs, loss_mat)
    if mode == "seq-mean-token-sum-norm":
        theirs = core_algos.agg_loss(loss_mat, mask, mode, loss_scale_factor=64)
        ours = ops.aggregate(loss_mat, mask, mode, ops.Denominators(norm_constant=_norm_constant(mask, 64)))
        assert_agree(ours, theirs, loss_mat)


@pytest.mark.covers("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")
@pytest.mark.parametrize("mode", AGG_MODES)
def test_agg_loss_global_denominators_match_verl_data_parallel(mode):
    """Two micro-batches as two data-parallel ranks: verl divides by the global counts and multiplies by
    dp_size (DDP then averages over ranks); workbench with the same global Denominators gives verl / dp_size,
    and the micro-batch losses sum to the full-batch loss."""
    g = _gen(22)
    mask = _mask(8, 6, g)
    loss_mat = torch.randn(8, 6, generator=g, dtype=F64).requires_grad_(True)
    n_tok, n_seq = float(mask.sum()), float((mask.sum(-1) > 0).sum())
    denom = ops.Denominators(num_tokens=n_tok, num_seqs=n_seq, norm_constant=n_seq * 6)
    parts = []
    for rows in (slice(0, 3), slice(3, 8)):
        theirs = core_algos.agg_loss(loss_mat[rows], mask[rows], mode, dp_size=2, batch_num_tokens=n_tok,
                                     global_batch_size=n_seq, loss_scale_factor=6)
        ours = ops.aggregate(loss_mat[rows], mask[rows], mode, denom)
        assert_agree(ours, theirs / 2, loss_mat)
        parts.append(ours)
    full = ops.aggregate(loss_mat, mask, mode, ops.Denominators.of(mask, norm_constant=n_seq * 6))
    assert_agree(sum(parts), full, loss_mat)


# ---------------------------------------------------------------------------------------------------- KL

# verl name -> (workbench kind, logr_clamp, value_clamp): verl clamps only low_var_kl.
KL_NAMES = {
    "kl": ("k1", None, None), "k1": ("k1", None, None), "mse": ("k2", None, None), "k2": ("k2", None, None),
    "abs": ("abs", None, None), "low_var_kl": ("k3", 20.0, 10.0), "k3": ("k3", 20.0, 10.0),
    "k1+": ("k1+", None, None), "abs+": ("abs+", None, None), "k3+": ("k3+", 20.0, 10.0),
    "low_var_kl+": ("k3+", 20.0, 10.0), "k2+": ("k2", None, None),
}


def _kl_inputs(seed, scale):
    g = _gen(seed)
    logp = (-2.0 * torch.rand(6, 5, generator=g, dtype=F64)).requires_grad_(True)
    ref = logp.detach() + scale * torch.randn(6, 5, generator=g, dtype=F64)
    return logp, ref


@pytest.mark.covers("k1", "k2", "k3", "abs", "kl-straight-through")
@pytest.mark.parametrize("name", sorted(KL_NAMES))
def test_kl_penalty_matches_verl(name):
    """Per-token value and gradient (of a random weighting) for every verl estimator name, with
    |logp - ref| < 2.5 so that k3 stays below verl's value clamp of 10 (see the next two tests)."""
    logp, ref = _kl_inputs(23, 0.8)
    ref = logp.detach() + (ref - logp.detach()).clamp(-2.4, 2.4)
    kind, logr_clamp, value_clamp = KL_NAMES[name]
    w = torch.rand(logp.shape, generator=_gen(230), dtype=F64)
    theirs = core_algos.kl_penalty(logp, ref, name)
    ours = kl.estimate(logp, ref, kind, logr_clamp=logr_clamp, value_clamp=value_clamp)
    torch.testing.assert_close(ours, theirs, **TOL)
    assert_agree((ours * w).sum(), (theirs * w).sum(), logp)


@pytest.mark.covers("k3")
def test_low_var_kl_clamps_match_verl():
    """|logp - ref| up to ~30: verl clamps ref - logp to +-20 and k3 to [-10, 10]; both clamps zero the
    gradient where active, in verl and in workbench (logr_clamp=20, value_clamp=10)."""
    logp, ref = _kl_inputs(24, 12.0)
    w = torch.rand(logp.shape, generator=_gen(240), dtype=F64)
    theirs = core_algos.kl_penalty(logp, ref, "low_var_kl")
    ours = kl.estimate(logp, ref, "k3", logr_clamp=20.0, value_clamp=10.0)
    assert float(((logp - ref).abs() > 20).sum()) > 0 and float((theirs == 10).sum()) > 0
    torch.testing.assert_close(ours, theirs, **TOL)
    assert_agree((ours * w).sum(), (theirs * w).sum(), logp)


@pytest.mark.covers("kl-straight-through", "k3")
def test_straight_through_k3_outside_clamp_range_matches_verl():
    """verl's `k3+` = k2 - sg(k2) + sg(clamped k3): the clamps act on the forward value only, the gradient
    is always the unclamped k2 gradient logp - ref. Inputs: tokens with k3 > 10 (ref - logp > 2.53) and
    with |logp - ref| > 20. No workbench setting reproduces this (see the report): value_clamp=10 clamps
    the straight-through sum and zeroes its gradient where k3 > 10, and logr_clamp=20 zeroes the k2
    gradient where |logr| > 20; without the clamps the forward value is not verl's."""
    logp = torch.tensor([[-1.0, -5.0, -6.0, -30.0, -1.0]], dtype=F64, requires_grad=True)
    ref = torch.tensor([[-1.5, -2.0, -2.0, -2.0, -26.0]], dtype=F64)  # logp - ref = 0.5, -3, -4, -28, 25
    theirs = core_algos.kl_penalty(logp, ref, "k3+")  # = "low_var_kl+"
    ours = kl.estimate(logp, ref, "k3+", logr_clamp=20.0, value_clamp=10.0)
    torch.testing.assert_close(ours, theirs, **TOL)
    assert_agree(ours.sum(), theirs.sum(), logp)


@pytest.mark.covers("kl-penalty", "k1")
def test_kl_in_reward_matches_verl_compute_rewards():
    """verl `compute_rewards(scores, old, ref, kl_ratio)` = scores - kl_ratio * (old - ref) per token
    (`use_kl_in_reward`); workbench `kl_in_reward(old, ref, mask, beta, "k1")` is the added penalty."""
    logp, ref = _kl_inputs(25, 0.5)
    old = logp.detach()
    mask = _mask(6, 5, _gen(250))
    scores = torch.randn(6, 5, generator=_gen(251), dtype=F64) * mask
    theirs = core_algos.compute_rewards(scores, old, ref, 0.05)
    assert_agree(scores + kl_in_reward(old, ref, mask, beta=0.05, estimator="k1"), theirs * mask)


@pytest.mark.covers("kl-penalty")
def test_adaptive_kl_controller_matches_verl():
    ours = AdaptiveKLController(beta=0.1, target=6.0, horizon=1000)
    theirs = core_algos.AdaptiveKLController(init_kl_coef=0.1, target_kl=6.0, horizon=1000)
    for current_kl, n_steps in [(12.0, 64), (1.0, 64), (6.5, 128), (0.0, 32), (40.0, 256)]:
        ours.update(current_kl, n_steps)
        theirs.update(current_kl, n_steps)
        assert ours.beta == pytest.approx(float(theirs.value), rel=1e-12)


# ------------------------------------------------------------------------------------ entropy, log-probs


@pytest.mark.covers("entropy-bonus")
@pytest.mark.parametrize("mode", AGG_MODES)
def test_entropy_and_entropy_loss_match_verl(mode):
    """verl_F.entropy_from_logits and `compute_entropy_loss` (= agg(H), which the actor subtracts times
    entropy_coeff); workbench `entropy_bonus(coef=1)` = -agg(H). float32 logits: workbench computes
    entropy in fp32 by convention (catalog 0.4), so tolerance is fp32's."""
    g = _gen(26)
    logits = (3 * torch.randn(5, 4, 11, generator=g)).requires_grad_(True)
    mask = _mask(5, 4, g).float()
    H = ops.entropy_from_logits(logits)
    f32 = dict(rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(H, verl_F.entropy_from_logits(logits), **f32)
    if mode == "seq-mean-token-sum-norm":
        return  # compute_entropy_loss takes no loss_scale_factor; covered by test_agg_loss_matches_verl
    theirs = core_algos.compute_entropy_loss(logits, mask, mode)
    ours = -entropy_bonus(H, mask, coef=1.0, agg=mode)
    torch.testing.assert_close(ours, theirs, **f32)
    (g_ours,) = torch.autograd.grad(ours, logits, retain_graph=True)
    (g_theirs,) = torch.autograd.grad(theirs, logits)
    torch.testing.assert_close(g_ours, g_theirs, **f32)


@pytest.mark.covers("ppo-clip")
def test_log_probs_match_verl():
    """verl_F.logprobs_from_logits (CPU: gather - logsumexp, `logprobs_from_logits_v2`) vs workbench
    `ops.logprobs_from_logits` on float32 logits (workbench computes log-probs in fp32 by convention)."""
    g = _gen(27)
    logits = (3 * torch.randn(4, 6, 13, generator=g)).requires_grad_(True)
    tokens = torch.randint(0, 13, (4, 6), generator=g)
    ours, theirs = ops.logprobs_from_logits(logits, tokens), verl_F.logprobs_from_logits(logits, tokens)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)
    w = torch.rand(4, 6, generator=g)
    (g_ours,) = torch.autograd.grad((ours * w).sum(), logits)
    (g_theirs,) = torch.autograd.grad((theirs * w).sum(), logits)
    torch.testing.assert_close(g_ours, g_theirs, rtol=1e-5, atol=1e-5)

