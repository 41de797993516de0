"""Agreement with TRL (huggingface/trl 1.16.0): value AND gradient on random inputs.

Importable TRL functions are called directly (`trl.trainer.utils.selective_log_softmax`,
`entropy_from_logits`, `nanstd`). TRL's GRPO/RLOO advantages and its GRPO-family / GMPO losses live inside
trainer methods, so they are transcribed in `tests/anchors/formulas.py` (file and function cited
there), and every loss test also runs TRL's own `_compute_loss` on a stand-in trainer to check the
transcription against the installed source.

Workbench parameters set to TRL's conventions: Bessel std with +1e-4 (advantages), no log-ratio clamp
(`logr_clamp=None`), k3 without clamps for `beta > 0`, CISPO's absolute cap `cap_abs = epsilon_high`,
SAPO without the +-20 clamp, dual clip c = `delta`. Losses in float64 at 1e-6; log-probs and entropy
on float32 logits at 1e-5, since the workbench computes them in fp32 by convention (catalog 0.4).
"""
from __future__ import annotations

import warnings
from types import SimpleNamespace

import pytest
import torch

from tests.helpers import AGREE_TOL, anchor_mask as _mask, assert_agree, seeded as _gen

trl = pytest.importorskip("trl", reason="TRL reference not installed; `make install` installs the `refs` extra")

from trl.trainer import utils as trl_utils  # noqa: E402
from trl.trainer.grpo_trainer import GRPOTrainer  # noqa: E402

with warnings.catch_warnings():  # TRLExperimentalWarning on import
    warnings.simplefilter("ignore")
    from trl.experimental.gmpo.gmpo_trainer import GMPOTrainer  # noqa: E402

from tests.anchors import formulas as ref  # noqa: E402
from workbench import kl, ops, registry  # noqa: E402
from workbench.advantages.group import group_stats  # noqa: E402
from workbench.batch import RolloutBatch  # noqa: E402
from workbench.regularizers.kl_penalty import kl_in_reward  # noqa: E402

F64 = torch.float64
TOL = AGREE_TOL
TOL_F32 = dict(rtol=1e-5, atol=1e-5)


def _policy_case(seed, B=8, T=6, spread=0.3):
    """logp (leaf), old, ref, per-sequence advantages [B] (TRL's layout), right-padded mask.
    Rows 0/1: ratios e^2.5 and e^-1.5 with A of both signs, so every clip branch is exercised."""
    g = _gen(seed)
    mask = _mask(B, T, g)
    old = -3.0 * torch.rand(B, T, generator=g, dtype=F64) - 0.05
    logr = spread * torch.randn(B, T, generator=g, dtype=F64)
    logr[0], logr[1] = 2.5, -1.5
    adv = torch.randn(B, generator=g, dtype=F64)
    adv[0], adv[1], adv[2], adv[3] = -1.0, 1.0, 0.8, -0.8
    logp = (old + logr).requires_grad_(True)
    ref_logp = old + 0.5 * torch.randn(B, T, generator=g, dtype=F64)
    return logp, old, ref_logp, adv, mask


def objective(key, *args, **hp):
    return registry.get("objective", key).fn(*args, **hp)


# ------------------------------------------------------------------------------- log-probs and entropy


@pytest.mark.covers("ppo-clip")
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_log_probs_match_selective_log_softmax(temperature):
    """trl.trainer.utils.selective_log_softmax (logits / temperature, gather - logsumexp) vs
    workbench ops.logprobs_from_logits, value and gradient w.r.t. the logits."""
    g = _gen(0)
    logits = (3 * torch.randn(3, 5, 17, generator=g)).requires_grad_(True)
    tokens = torch.randint(0, 17, (3, 5), generator=g)
    ours = ops.logprobs_from_logits(logits, tokens, temperature=temperature, chunk=4)
    theirs = trl_utils.selective_log_softmax(logits, tokens, temperature=temperature)
    torch.testing.assert_close(ours, theirs, **TOL_F32)
    w = torch.rand(3, 5, generator=g)
    (g_ours,) = torch.autograd.grad((ours * w).sum(), logits)
    (g_theirs,) = torch.autograd.grad((theirs * w).sum(), logits)
    torch.testing.assert_close(g_ours, g_theirs, **TOL_F32)


@pytest.mark.covers("entropy-bonus")
@pytest.mark.parametrize("chunk", [128, 3])
def test_entropy_matches_trl_entropy_from_logits(chunk):
    g = _gen(1)
    logits = (3 * torch.randn(4, 5, 19, generator=g)).requires_grad_(True)
    ours = ops.entropy_from_logits(logits, chunk=chunk)
    theirs = trl_utils.entropy_from_logits(logits, chunk_size=chunk)
    torch.testing.assert_close(ours, theirs, **TOL_F32)
    w = torch.rand(4, 5, generator=g)
    (g_ours,) = torch.autograd.grad((ours * w).sum(), logits)
    (g_theirs,) = torch.autograd.grad((theirs * w).sum(), logits)
    torch.testing.assert_close(g_ours, g_theirs, **TOL_F32)


# ------------------------------------------------------------------------------------------ advantages


def _grpo_rewards(seed, G=4, n_groups=3):
    g = _gen(seed)
    rewards = torch.randint(0, 3, (G * n_groups,), generator=g).to(F64)
    rewards = rewards + 0.25 * torch.randn(G * n_groups, generator=g, dtype=F64)
    rewards[:G] = 1.0  # an all-equal group
    return rewards, torch.arange(n_groups).repeat_interleave(G)


@pytest.mark.covers("grpo")
def test_group_std_is_trl_nanstd():
    rewards, group = _grpo_rewards(2)
    _, std, _ = group_stats(rewards, group, unbiased=True)
    torch.testing.assert_close(std, trl_utils.nanstd(rewards.view(-1, 4), dim=1).repeat_interleave(4), **TOL)


@pytest.mark.covers("grpo", "dr_grpo", "lite-ppo")
@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_grpo_advantages_match_trl(scale):
    """TRL `scale_rewards` = workbench `scale` (group / batch = LitePPO / none = Dr.GRPO), Bessel, +1e-4."""
    rewards, group = _grpo_rewards(3)
    batch = RolloutBatch.from_rewards(rewards, group, lengths=torch.full((12,), 3))
    ours = registry.get("advantage", "grpo").fn(batch, scale=scale, unbiased=True, eps=1e-4)
    theirs = ref.trl_grpo_advantages(rewards, 4, scale)
    assert_agree(ours[:, 0], theirs)
    assert float(ours[:4].abs().max()) == 0.0


@pytest.mark.covers("rloo", "kl-penalty", "k1")
@pytest.mark.parametrize("beta", [0.0, 0.05])
def test_rloo_advantages_match_trl(beta):
    """TRL RLOO: leave-one-out baseline, reward minus beta * sum_t k1(old, ref); workbench `rloo` with the
    penalty as `token_rewards = kl_in_reward(old, ref, mask, beta, "k1")` (summed per sequence)."""
    rewards, group = _grpo_rewards(4)
    g = _gen(40)
    mask = _mask(12, 5, g)
    old = -2 * torch.rand(12, 5, generator=g, dtype=F64)
    ref_logp = old + 0.3 * torch.randn(12, 5, generator=g, dtype=F64)
    batch = RolloutBatch(response_ids=torch.zeros(12, 5, dtype=torch.long), mask=mask, group=group, rewards=rewards,
                         token_rewards=kl_in_reward(old, ref_logp, mask, beta=beta, estimator="k1"))
    ours = registry.get("advantage", "rloo").fn(batch)
    theirs = ref.trl_rloo_advantages(rewards, 4, beta=beta, old_per_token_logps=old,
                                     ref_per_token_logps=ref_logp, completion_mask=mask)
    assert_agree(ours, theirs[:, None] * mask)


# ------------------------------------------------------------------------------------------------ losses


def _ours_grpo_family(trl_kw, logp, old, ref_logp, adv, mask):
    """The workbench composition matching one TRL configuration (single process, GA = 1)."""
    A = adv[:, None] * mask
    loss_type, level = trl_kw["loss_type"], trl_kw.get("importance_sampling_level", "token")
    eps_low, eps_high = trl_kw.get("epsilon_low", 0.2), trl_kw.get("epsilon_high", 0.2)
    denom = None
    if loss_type in ("grpo", "sapo"):
        agg = "seq-mean-token-mean"
    elif loss_type == "bnpo":
        agg = "token-mean"  # local tokens
    elif loss_type == "dr_grpo":  # S / (B_local * max_completion_length)
        agg = "seq-mean-token-sum-norm"
        denom = ops.Denominators(norm_constant=mask.shape[0] * trl_kw["max_completion_length"])
    elif loss_type in ("dapo", "cispo"):  # S / num_items_in_batch (tokens of the whole generation batch)
        agg, denom = "token-mean", ops.Denominators(num_tokens=trl_kw["num_items_in_batch"])
    elif loss_type == "luspo":  # mean_i(|y_i| l_i)
        agg = "seq-mean-token-sum"

    if loss_type == "cispo":
        loss, _ = objective("cispo", logp, old, A, mask, agg=agg, denom=denom, cap_abs=eps_high, level=level)
    elif loss_type == "sapo":
        loss, _ = objective("sapo", logp, old, A, mask, agg=agg, tau_pos=trl_kw.get("sapo_temperature_pos", 1.0),
                            tau_neg=trl_kw.get("sapo_temperature_neg", 1.05), logr_clamp=None, level=level)
    elif loss_type == "luspo":
        assert level == "sequence"
        loss, _ = objective("luspo", logp, old, A, mask, agg=agg, eps_low=eps_low, eps_high=eps_high)
    elif level == "sequence":
        loss, _ = objective("gspo", logp, old, A, mask, agg=agg, eps_low=eps_low, eps_high=eps_high)
    else:
        loss, _ = objective("ppo-clip", logp, old, A, mask, agg=agg, denom=denom, eps_low=eps_low,
                            eps_high=eps_high, dual_clip_c=trl_kw.get("delta"))
    beta = trl_kw.get("beta", 0.0)
    if beta:  # TRL adds beta * k3 (no clamp) per token before aggregating: linear, so = beta * agg(k3)
        batch = SimpleNamespace(ref_logp=ref_logp, old_logp=old, mask=mask)
        correction = level if trl_kw.get("use_bias_correction_kl") else None
        kl_loss, _ = registry.get("regularizer", "kl-penalty").fn(
            SimpleNamespace(logp=logp), batch, agg=agg, denom=denom, beta=beta, estimator="k3",
            bias_correction=correction)
        loss = loss + kl_loss
    return loss


# name -> TRL GRPOConfig-equivalent settings (epsilon_low = `epsilon`)
GRPO_CASES = {
    "grpo": {"loss_type": "grpo"},
    "grpo_clip_higher": {"loss_type": "grpo", "epsilon_low": 0.2, "epsilon_high": 0.28},
    "bnpo": {"loss_type": "bnpo"},
    "dr_grpo": {"loss_type": "dr_grpo", "max_completion_length": 8},
    "dapo": {"loss_type": "dapo", "epsilon_high": 0.28, "num_items_in_batch": 90},
    "delta": {"loss_type": "grpo", "delta": 3.0},
    "beta_grpo": {"loss_type": "grpo", "beta": 0.04},
    "beta_dapo": {"loss_type": "dapo", "beta": 0.04, "num_items_in_batch": 37},
    "cispo": {"loss_type": "cispo", "epsilon_high": 1.3, "num_items_in_batch": 60},
    "sapo": {"loss_type": "sapo"},
    "sapo_temps": {"loss_type": "sapo", "sapo_temperature_pos": 0.5, "sapo_temperature_neg": 2.0},
    "gspo": {"loss_type": "grpo", "importance_sampling_level": "sequence", "epsilon_low": 3e-4,
             "epsilon_high": 4e-4},
    "gspo_wide": {"loss_type": "grpo", "importance_sampling_level": "sequence", "epsilon_low": 0.05,
                  "epsilon_high": 0.08},
    "luspo": {"loss_type": "luspo", "importance_sampling_level": "sequence", "epsilon_low": 0.05,
              "epsilon_high": 0.08},
    "cispo_sequence": {"loss_type": "cispo", "importance_sampling_level": "sequence", "epsilon_high": 1.1,
                       "num_items_in_batch": 60},
    "sapo_sequence": {"loss_type": "sapo", "importance_sampling_level": "sequence", "sapo_temperature_pos": 0.5,
                      "sapo_temperature_neg": 2.0},
    "beta_bias_corrected": {"loss_type": "grpo", "beta": 0.04, "use_bias_correction_kl": True},
    "beta_bias_corrected_dapo": {"loss_type": "dapo", "beta": 0.1, "use_bias_correction_kl": True,
                                 "num_items_in_batch": 50},
    "beta_bias_corrected_gspo": {"loss_type": "grpo", "importance_sampling_level": "sequence", "beta": 0.04,
                                 "use_bias_correction_kl": True, "epsilon_low": 0.05, "epsilon_high": 0.08},
}


@pytest.mark.covers("ppo-clip", "dual-clip", "gspo", "cispo", "sapo", "luspo", "dapo", "dr_grpo", "kl-penalty",
                    "k3", "token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")
@pytest.mark.parametrize("name", sorted(GRPO_CASES))
def test_grpo_family_loss_matches_trl(name):
    """TRL `GRPOTrainer._compute_loss` for one loss_type / importance_sampling_level configuration:
    (1) the transcription equals TRL's own method (value and gradient); (2) the workbench composition
    equals the transcription (value and gradient w.r.t. logp)."""
    trl_kw = GRPO_CASES[name]
    logp, old, ref_logp, adv, mask = _policy_case(5)
    kw = dict(trl_kw, ref_per_token_logps=ref_logp)
    formula = ref.trl_grpo_loss(logp, old, adv, mask, **kw)
    method = ref.call_trl_compute_loss(GRPOTrainer._compute_loss, logp, old, adv, mask, **kw)
    assert_agree(formula, method, logp)
    assert_agree(_ours_grpo_family(trl_kw, logp, old, ref_logp, adv, mask), formula, logp)


@pytest.mark.covers("seq-mean-token-mean", "ppo-clip")
def test_trl_grpo_mean_counts_empty_rows_like_denominators_num_seqs_B():
    """TRL `loss_type="grpo"` ends with `.mean()` over all B rows, empty completions included (their row
    loss is 0); workbench's default counts non-empty rows, and Denominators(num_seqs=B) reproduces TRL."""
    logp, old, ref_logp, adv, mask = _policy_case(6)
    mask = mask.clone()
    mask[-2:] = 0.0
    theirs = ref.trl_grpo_loss(logp, old, adv, mask, loss_type="grpo")
    ours, _ = objective("ppo-clip", logp, old, adv[:, None] * mask, mask, agg="seq-mean-token-mean",
                        denom=ops.Denominators(num_seqs=float(mask.shape[0])))
    assert_agree(ours, theirs, logp)


@pytest.mark.covers("geo_mean")
@pytest.mark.parametrize("eps_low,eps_high,beta", [(0.4, 0.4, 0.0), (0.2, 0.3, 0.0), (0.4, 0.4, 0.04)])
def test_gmpo_loss_matches_trl(eps_low, eps_high, beta):
    """TRL `trl/experimental/gmpo` (GMPOTrainer._compute_loss): transcription = TRL's method, and workbench
    `geo_mean` (+ beta * seq-mean-token-mean k3 for beta > 0) = transcription."""
    logp, old, ref_logp, adv, mask = _policy_case(7)
    formula = ref.trl_gmpo_loss(logp, old, adv, mask, epsilon_low=eps_low, epsilon_high=eps_high, beta=beta,
                                ref_per_token_logps=ref_logp)
    method = ref.call_trl_compute_loss(GMPOTrainer._compute_loss, logp, old, adv, mask, epsilon_low=eps_low,
                                       epsilon_high=eps_high, beta=beta, ref_per_token_logps=ref_logp)
    assert_agree(formula, method, logp)
    ours, _ = objective("geo_mean", logp, old, adv[:, None] * mask, mask, eps_low=eps_low, eps_high=eps_high)
    if beta:
        k3 = kl.estimate(logp, ref_logp, "k3")
        ours = ours + beta * ops.aggregate(k3, mask, "seq-mean-token-mean")
    assert_agree(ours, formula, logp)
