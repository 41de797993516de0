"""Agreement with TRL (huggingface/trl 1.16.0) for the F7 pairwise losses and KTO: value AND gradient, float64, 1e-6.

TRL keeps these losses inside trainer methods, so each test runs TRL's OWN method on a stand-in `self`
carrying only the attributes the method reads (the single-process values), and a stand-in model whose
fused LM head returns given per-token log-probs (zero outside the completion, as TRL's fused head does):

  - `DPOTrainer._compute_loss` (trl/trainer/dpo_trainer.py) for loss_type sigmoid, ipo, hinge, robust, with
    `precompute_ref_log_probs=True`, f_divergence_type="reverse_kl", ld_alpha=None, use_weighting=False;
  - `CPOTrainer.get_batch_loss_metrics` + `cpo_loss` + `get_batch_logps` (trl/experimental/cpo/cpo_trainer.py)
    for loss_type simpo (cpo_alpha=0, alpha=0) and for sigmoid with label_smoothing (TRL's only cDPO form;
    fed the log-ratios u_w, u_l as the "policy" log-probs, CPO's sigmoid loss on them IS cDPO);
  - `KTOTrainer._compute_loss` (trl/trainer/kto_trainer.py), loss_type="kto", with calculate_KL=True and
    precomputed reference log-probs.

Workbench conventions pinned to TRL's: ipo(length_average=True, chosen_len, rejected_len) (TRL divides by the
completion-mask token count); cdpo-robust(form="rdpo") for `robust`, form="cdpo" for CPO label smoothing;
hinge(margin=None); simpo(gamma=simpo_gamma, gamma_beta_ratio=None) on summed log-probs + lengths; kto on
unpaired logp/ref_logp/label with kl_logp/kl_ref_logp. Each anchor is `pytest.importorskip`ped with a reason.
"""
from __future__ import annotations

import types
import warnings
from collections import defaultdict
from types import SimpleNamespace

import pytest
import torch

from tests.helpers import assert_agree
from workbench.preference.kto import kto
from workbench.preference.pairwise import cdpo_robust, dpo, hinge, ipo, simpo

pytest.importorskip("trl", reason="TRL reference not installed; `make install` installs the `refs` extra")

F64 = torch.float64
METRICS = ("rewards/chosen", "rewards/rejected", "rewards/margins", "rewards/accuracies", "logps/chosen",
           "logps/rejected")


def _trainer_class(module: str, name: str):
    mod = pytest.importorskip(module, reason=f"TRL {name} not importable from {module} in this TRL version")
    return getattr(mod, name)


class _SingleProcessAccelerator:
    device = torch.device("cpu")

    def gather(self, x):
        return x

    def gather_for_metrics(self, x):
        return x


class _FusedHeadModel:
    """Stand-in for a model patched by TRL's `add_fused_lm_head`: returns the given per-token log-probs,
    keyed by the width of `input_ids` (KTO calls the model on the main and on the mismatched KL batch)."""

    def __init__(self, *per_token_logps):
        self.outputs = {lp.shape[1] + 1: lp for lp in per_token_logps}

    def __call__(self, input_ids, **kwargs):
        lp = self.outputs[input_ids.shape[1]]
        zeros = torch.zeros_like(lp)
        return SimpleNamespace(log_probs=lp, entropy=zeros, mean_logits=zeros, is_top1=zeros.bool())


def _completion(n_rows, T, seed):
    """[n_rows, T] completion mask: column 0 a prompt token, then 1..T-1 completion tokens (right padding)."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, T, (n_rows,), generator=g)
    lengths[0] = T - 1
    return (torch.arange(T)[None, :] >= 1) & (torch.arange(T)[None, :] <= lengths[:, None])


def _dpo_case(seed, B=6, T=9, spread=1.0):
    """Per-token policy log-probs (leaf, [2B, T-1] = TRL's shifted positions, chosen rows first), the completion
    mask [2B, T], and summed reference log-probs near the policy's."""
    g = torch.Generator().manual_seed(seed)
    completion_mask = _completion(2 * B, T, seed).long()
    shift = completion_mask[:, 1:].to(F64)
    leaf = (-2.0 * torch.rand(2 * B, T - 1, generator=g, dtype=F64)).requires_grad_(True)
    summed = (leaf.detach() * shift).sum(-1)
    ref = summed + spread * torch.randn(2 * B, generator=g, dtype=F64) * shift.sum(-1).sqrt()
    return leaf, completion_mask, ref


def trl_dpo_loss(leaf, completion_mask, ref, *, loss_type, beta, label_smoothing=0.0):
    """TRL's `DPOTrainer._compute_loss` on a stand-in trainer; returns (loss, logged metrics)."""
    DPOTrainer = _trainer_class("trl.trainer.dpo_trainer", "DPOTrainer")
    B = leaf.shape[0] // 2
    trainer = SimpleNamespace(
        model=SimpleNamespace(training=True), accelerator=_SingleProcessAccelerator(), aux_loss_enabled=False,
        ld_alpha=None, precompute_ref_logps=True, f_divergence_type="reverse_kl", loss_types=[loss_type],
        loss_weights=[1.0], beta=beta, label_smoothing=label_smoothing, use_weighting=False,
        _metrics=defaultdict(lambda: defaultdict(list)), _total_train_tokens=0, _tp_size=1,
        args=SimpleNamespace(gradient_checkpointing_kwargs=None))
    inputs = {
        "input_ids": torch.arange(completion_mask.numel()).reshape(completion_mask.shape) % 50,
        "attention_mask": torch.ones_like(completion_mask), "completion_mask": completion_mask,
        "ref_chosen_logps": ref[:B], "ref_rejected_logps": ref[B:],
    }
    model = _FusedHeadModel(leaf * completion_mask[:, 1:].to(leaf.dtype))
    loss = DPOTrainer._compute_loss(trainer, model, inputs, return_outputs=False)
    return loss, {k: v[-1] for k, v in trainer._metrics["train"].items()}


def ours_inputs(leaf, completion_mask, ref):
    B = leaf.shape[0] // 2
    shift = completion_mask[:, 1:].to(F64)
    summed, lengths = (leaf * shift).sum(-1), shift.sum(-1)
    return (summed[:B], summed[B:], ref[:B], ref[B:]), {"chosen_len": lengths[:B], "rejected_len": lengths[B:]}


def _check_metrics(ours, theirs, names=METRICS):
    for name in names:
        assert ours[name] == pytest.approx(theirs[name], rel=1e-9, abs=1e-9), name


# ---------------------------------------------------------------------------------- DPOTrainer losses


@pytest.mark.covers("dpo")
@pytest.mark.parametrize("beta", [0.1, 0.5])
def test_dpo_sigmoid_matches_trl(beta):
    leaf, cm, ref = _dpo_case(0)
    args, _ = ours_inputs(leaf, cm, ref)
    loss, metrics = dpo(*args, beta=beta)
    theirs, trl_metrics = trl_dpo_loss(leaf, cm, ref, loss_type="sigmoid", beta=beta)
    assert_agree(loss, theirs, leaf)
    _check_metrics(metrics, trl_metrics)


@pytest.mark.covers("dpo", "cdpo-robust")
def test_trl_dpo_sigmoid_ignores_label_smoothing():
    """TRL 1.16 `DPOTrainer` applies label_smoothing only to robust/exo_pair/aot: its sigmoid loss stays plain
    DPO, so TRL's cDPO anchor is `CPOTrainer` (test_cdpo_matches_trl_cpo_label_smoothing)."""
    leaf, cm, ref = _dpo_case(1)
    args, _ = ours_inputs(leaf, cm, ref)
    theirs, _ = trl_dpo_loss(leaf, cm, ref, loss_type="sigmoid", beta=0.2, label_smoothing=0.2)
    assert_agree(dpo(*args, beta=0.2)[0], theirs, leaf)


@pytest.mark.covers("ipo")
@pytest.mark.parametrize("beta", [0.1, 1.0])
def test_ipo_length_average_matches_trl(beta):
    leaf, cm, ref = _dpo_case(2, spread=0.3)
    args, lengths = ours_inputs(leaf, cm, ref)
    loss, metrics = ipo(*args, beta=beta, length_average=True, **lengths)
    theirs, trl_metrics = trl_dpo_loss(leaf, cm, ref, loss_type="ipo", beta=beta)
    assert_agree(loss, theirs, leaf)
    _check_metrics(metrics, trl_metrics)
    # the paper's summed convention is a different loss on multi-token completions ...
    assert not torch.allclose(ipo(*args, beta=beta)[0], theirs)


@pytest.mark.covers("ipo")
def test_ipo_sum_convention_matches_trl_on_single_token_completions():
    leaf, cm, ref = _dpo_case(3, T=2)  # ... and the same one when every completion is one token long
    args, _ = ours_inputs(leaf, cm, ref)
    theirs, _ = trl_dpo_loss(leaf, cm, ref, loss_type="ipo", beta=0.1)
    assert_agree(ipo(*args, beta=0.1)[0], theirs, leaf)


@pytest.mark.covers("hinge")
@pytest.mark.parametrize("beta", [0.1, 0.5])
def test_hinge_matches_trl(beta):
    leaf, cm, ref = _dpo_case(4, spread=6.0)
    args, _ = ours_inputs(leaf, cm, ref)
    loss, metrics = hinge(*args, beta=beta)
    theirs, trl_metrics = trl_dpo_loss(leaf, cm, ref, loss_type="hinge", beta=beta)
    assert 0 < metrics["hinge/active"] < 1  # pairs on both sides of the margin 1/beta
    assert_agree(loss, theirs, leaf)
    _check_metrics(metrics, trl_metrics)


@pytest.mark.covers("cdpo-robust")
@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_rdpo_matches_trl_robust(eps):
    leaf, cm, ref = _dpo_case(5)
    args, _ = ours_inputs(leaf, cm, ref)
    loss, metrics = cdpo_robust(*args, beta=0.2, label_smoothing=eps, form="rdpo")
    theirs, trl_metrics = trl_dpo_loss(leaf, cm, ref, loss_type="robust", beta=0.2, label_smoothing=eps)
    assert_agree(loss, theirs, leaf)
    _check_metrics(metrics, trl_metrics)


# --------------------------------------------------------------------------------- CPOTrainer (SimPO)


def _cpo_trainer(loss_type, beta, label_smoothing, simpo_gamma=None):
    with warnings.catch_warnings():  # TRLExperimentalWarning on import
        warnings.simplefilter("ignore")
        CPOTrainer = _trainer_class("trl.experimental.cpo.cpo_trainer", "CPOTrainer")
    trainer = SimpleNamespace(alpha=0.0, accelerator=_SingleProcessAccelerator(), loss_type=loss_type, beta=beta,
                              label_smoothing=label_smoothing, simpo_gamma=simpo_gamma, cpo_alpha=0.0,
                              aux_loss_enabled=False)
    trainer.cpo_loss = types.MethodType(CPOTrainer.cpo_loss, trainer)
    return CPOTrainer, trainer


@pytest.mark.covers("simpo")
@pytest.mark.parametrize("beta,simpo_gamma,eps", [(0.1, 0.5, 0.0), (2.0, 1.0, 0.0), (2.5, 1.4, 0.1)])
def test_simpo_matches_trl_cpo(beta, simpo_gamma, eps):
    """From logits: TRL averages log-probs over the label mask (`get_batch_logps(average_log_prob=True)`), the
    workbench divides summed log-probs by the lengths; then CPO's simpo loss with simpo_gamma = our `gamma`."""
    CPOTrainer, trainer = _cpo_trainer("simpo", beta, eps, simpo_gamma)
    B, T, V = 5, 8, 11
    g = torch.Generator().manual_seed(6)
    logits = torch.randn(2 * B, T, V, generator=g, dtype=F64).requires_grad_(True)
    mask = _completion(2 * B, T, 6)
    labels = torch.randint(0, V, (2 * B, T), generator=g).masked_fill(~mask, -100)
    avg = CPOTrainer.get_batch_logps(logits, labels, average_log_prob=True)
    nll0 = torch.tensor(0.0, dtype=F64)
    trainer.concatenated_forward = lambda model, batch: (avg[:B], avg[B:], logits[:B], logits[B:], nll0)
    theirs, trl_metrics = CPOTrainer.get_batch_loss_metrics(trainer, None, {})

    token_logp = torch.log_softmax(logits[:, :-1], -1).gather(-1, labels[:, 1:].clamp(min=0)[..., None])[..., 0]
    shift = mask[:, 1:].to(F64)
    summed, lengths = (token_logp * shift).sum(-1), shift.sum(-1)
    loss, metrics = simpo(summed[:B], summed[B:], beta=beta, gamma=simpo_gamma, gamma_beta_ratio=None,
                          label_smoothing=eps, chosen_len=lengths[:B], rejected_len=lengths[B:])
    assert_agree(loss, theirs, logits)
    # the ratio convention reproduces TRL with gamma_beta_ratio = simpo_gamma / beta
    loss_ratio, _ = simpo(summed[:B], summed[B:], beta=beta, gamma_beta_ratio=simpo_gamma / beta,
                          label_smoothing=eps, chosen_len=lengths[:B], rejected_len=lengths[B:])
    assert_agree(loss_ratio, theirs, logits)
    # TRL CPO logs rewards as beta * averaged log-probs and logps/* as the AVERAGED log-probs
    _check_metrics(metrics, trl_metrics, ("rewards/chosen", "rewards/rejected", "rewards/margins",
                                          "rewards/accuracies"))
    assert metrics["logps/chosen_avg"] == pytest.approx(trl_metrics["logps/chosen"], rel=1e-9)
    assert metrics["logps/rejected_avg"] == pytest.approx(trl_metrics["logps/rejected"], rel=1e-9)


@pytest.mark.covers("cdpo-robust")
@pytest.mark.parametrize("eps", [0.0, 0.1, 0.4])
def test_cdpo_matches_trl_cpo_label_smoothing(eps):
    """CPO's sigmoid loss −(1−ε)logσ(β(a−b)) − ε logσ(−β(a−b)) on a = u_w, b = u_l is cDPO on Δ."""
    CPOTrainer, trainer = _cpo_trainer("sigmoid", 0.3, eps)
    leaf, cm, ref = _dpo_case(7)
    (c, r, rc, rr), _ = ours_inputs(leaf, cm, ref)
    losses, _, _ = trainer.cpo_loss(c - rc, r - rr)
    loss, _ = cdpo_robust(c, r, rc, rr, beta=0.3, label_smoothing=eps, form="cdpo")
    assert_agree(loss, losses.mean(), leaf)


# ------------------------------------------------------------------------------------------ KTOTrainer


def trl_kto_loss(leaf, completion_mask, ref, label, kl_leaf, kl_mask, ref_kl, *, beta, desirable_weight,
                 undesirable_weight):
    KTOTrainer = _trainer_class("trl.trainer.kto_trainer", "KTOTrainer")
    trainer = SimpleNamespace(
        model=SimpleNamespace(training=True), accelerator=_SingleProcessAccelerator(), calculate_KL=True,
        aux_loss_enabled=False, precompute_ref_logps=True, loss_type="kto", beta=beta,
        desirable_weight=desirable_weight, undesirable_weight=undesirable_weight,
        _metrics=defaultdict(lambda: defaultdict(list)), _total_train_tokens=0, _tp_size=1,
        args=SimpleNamespace(gradient_checkpointing_kwargs=None))
    trainer._compute_kl_logps = types.MethodType(KTOTrainer._compute_kl_logps, trainer)
    ids = lambda m: torch.arange(m.numel()).reshape(m.shape) % 50  # noqa: E731
    batch = {
        "input_ids": ids(completion_mask), "attention_mask": torch.ones_like(completion_mask),
        "completion_mask": completion_mask, "KL_input_ids": ids(kl_mask), "KL_attention_mask": torch.ones_like(kl_mask),
        "KL_completion_mask": kl_mask, "label": label, "ref_logps": ref, "ref_KL_logps": ref_kl,
    }
    model = _FusedHeadModel(leaf * completion_mask[:, 1:].to(F64), kl_leaf * kl_mask[:, 1:].to(F64))
    loss = KTOTrainer._compute_loss(trainer, model, batch, return_outputs=False)
    return loss, {k: v[-1] for k, v in trainer._metrics["train"].items()}


@pytest.mark.covers("kto")
@pytest.mark.parametrize("kl_sign,beta,wd,wu", [(1, 0.1, 1.0, 1.0), (1, 0.5, 1.33, 0.8), (-1, 0.2, 1.0, 2.0)])
def test_kto_matches_trl(kl_sign, beta, wd, wu):
    """kl_sign=+1: mismatched-pair KL > 0 (z used); -1: KL < 0, TRL clamps z to 0."""
    B, T, T_kl = 8, 9, 7
    g = torch.Generator().manual_seed(8)
    cm, kl_mask = _completion(B, T, 8).long(), _completion(B, T_kl, 9).long()
    leaf = (-2.0 * torch.rand(B, T - 1, generator=g, dtype=F64)).requires_grad_(True)
    kl_leaf = -2.0 * torch.rand(B, T_kl - 1, generator=g, dtype=F64)
    logp = (leaf * cm[:, 1:].to(F64)).sum(-1)
    kl_logp = (kl_leaf * kl_mask[:, 1:].to(F64)).sum(-1)
    ref = logp.detach() + 3 * torch.randn(B, generator=g, dtype=F64)
    ref_kl = kl_logp - kl_sign * (0.5 + torch.rand(B, generator=g, dtype=F64))
    label = torch.tensor([True, False, True, True, False, True, False, True])

    theirs, trl_metrics = trl_kto_loss(leaf, cm, ref, label, kl_leaf, kl_mask, ref_kl, beta=beta,
                                       desirable_weight=wd, undesirable_weight=wu)
    loss, metrics = kto(logp=logp, ref_logp=ref, label=label, kl_logp=kl_logp, kl_ref_logp=ref_kl, beta=beta,
                        desirable_weight=wd, undesirable_weight=wu)
    assert_agree(loss, theirs, leaf)
    assert (metrics["kl"] > 0) == (kl_sign > 0)
    _check_metrics(metrics, trl_metrics, ("kl", "rewards/chosen", "rewards/rejected", "rewards/margins",
                                          "logps/chosen", "logps/rejected"))
