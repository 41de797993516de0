"""Pairwise preference losses on summed sequence log-probs: dpo, ipo, cdpo-robust, hinge, simpo.

Notation (catalog F7): u_w = logπ(y_w) − logπ_ref(y_w), u_l likewise, Δ = u_w − u_l; barred quantities
are divided by the response length |y| (number of response tokens). Every loss is the mean over pairs.

Conventions that differ between the anchors are parameters, never silent choices:
  - ipo:          `length_average` False = Δ summed (IPO paper eq. 17 as OpenRLHF `ipo_enable`, rlhf-book
                  `IPOLoss`); True = TRL `loss_type="ipo"`, Δ̄ averaged per token (needs chosen_len/rejected_len).
  - cdpo-robust:  `form` "cdpo" = label smoothing (OpenRLHF / TRL-CPO `label_smoothing`), "rdpo" = TRL
                  `loss_type="robust"` (unbiased, divides by 1 − 2ε).
  - hinge:        `margin` None = TRL relu(1 − βΔ) (margin 1/β in Δ units, slope β); a number δ = SLiC-HF
                  relu(δ − Δ) (slope 1).
  - simpo:        `gamma_beta_ratio` γ' (SimPO repo / rlhf-book: −log σ(β(Δ̄ − γ'))) XOR `gamma` γ (TRL CPO
                  `simpo_gamma`: −log σ(βΔ̄ − γ)); the two coincide at γ = β·γ'.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from workbench import registry
from workbench.preference.base import (TRL_LOGS, check_beta, check_pairs, dpo_metrics, preference_metrics,
                                       smoothed_logistic)


def response_lengths(chosen_len, rejected_len, like: torch.Tensor, method: str):
    """chosen_len / rejected_len as tensors shaped like `like` ([B]), finite and > 0; ValueError otherwise."""
    if chosen_len is None or rejected_len is None:
        raise ValueError(f"{method} averages log-probs per token and needs chosen_len and rejected_len "
                         f"(response token counts, shape [B]); got chosen_len={chosen_len!r}, "
                         f"rejected_len={rejected_len!r}")
    out = []
    for name, n in (("chosen_len", chosen_len), ("rejected_len", rejected_len)):
        n = torch.as_tensor(n, dtype=like.dtype, device=like.device)
        if n.shape != like.shape:
            raise ValueError(f"{name} has shape {tuple(n.shape)} but the log-probs have {tuple(like.shape)}: "
                             "one length per pair")
        if not bool(torch.isfinite(n).all()) or bool((n <= 0).any()):
            bad = torch.nonzero(~(torch.isfinite(n) & (n > 0))).flatten().tolist()[:10]
            raise ValueError(f"{name} must be > 0 (response token counts); rows {bad} are not "
                             "(empty responses cannot be length-normalized)")
        out.append(n)
    return out[0], out[1]


def _margins(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp):
    check_pairs(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp)
    return chosen_logp - ref_chosen_logp, rejected_logp - ref_rejected_logp


# ---------------------------------------------------------------------------------------------- dpo


DPO_LOGS = {
    "dpo/weight": ("DPO: mean sigma(-beta * margin), each pair's gradient weight; falls as pairs are learned.",
                   "Exactly 0.5 at step 0 (margin 0 at the reference), then falling as pairs are learned. Above 0.5: "
                   "most pairs are ranked the wrong way. Near 0 early: the pairs are too easy."),
}


@registry.preference(
    "dpo", title="Direct Preference Optimization: Your Language Model is Secretly a Reward Model",
    summary="logistic loss on the implicit reward margin β·Δ (TRL loss_type='sigmoid'); gradient weight "
            "β·σ(−βΔ) vanishes for confidently ranked pairs.",
    equation=r"\mathcal{L} = -\log\sigma(\beta\Delta),\quad \Delta = \log\frac{\pi(y_w)}{\pi_{ref}(y_w)}"
             r" - \log\frac{\pi(y_l)}{\pi_{ref}(y_l)}", logs={**TRL_LOGS, **DPO_LOGS})
def dpo(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, *, beta=0.1):
    r"""DPO: L = −log σ(β·Δ), Δ = (logπ(y_w) − logπ_ref(y_w)) − (logπ(y_l) − logπ_ref(y_l)).

    Inputs are summed sequence log-probs [B]; loss is the mean over pairs. ∂L/∂Δ = −β·σ(−βΔ).
    Matches TRL `DPOTrainer` `loss_type="sigmoid"` (which ignores `label_smoothing`: for cDPO use
    `cdpo-robust`). Metrics: TRL's rewards/* and logps/* (implicit reward β·u), plus `dpo/weight` =
    mean σ(−βΔ), the per-pair gradient weight divided by β.
    """
    check_beta(beta)
    u_w, u_l = _margins(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp)
    z = beta * (u_w - u_l)
    loss = -F.logsigmoid(z).mean()
    metrics = dpo_metrics(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, beta)
    metrics["dpo/weight"] = float(torch.sigmoid(-z.detach()).mean())
    return loss, metrics


# ---------------------------------------------------------------------------------------------- ipo


IPO_LOGS = {
    "ipo/margin": ("IPO: mean log-ratio margin being regressed.",
                   "0 at step 0, rising towards ipo/target (5 with beta = 0.1) and settling there: IPO pulls margins "
                   "past the target back. Stuck near 0: the pairs are not learned."),
    "ipo/target": ("IPO: the regression target 1/(2 beta).",
                   "Constant 1/(2 beta): 5 with the recipe's beta = 0.1. Read ipo/margin against it."),
}


@registry.preference(
    "ipo", title="A General Theoretical Paradigm to Understand Learning from Human Preferences",
    summary="squared regression of the log-ratio margin onto 1/(2β). length_average=False: summed log-probs "
            "(paper eq. 17, OpenRLHF, rlhf-book); True: per-token averages (TRL loss_type='ipo').",
    equation=r"\mathcal{L} = \Big(\Delta - \frac{1}{2\beta}\Big)^2\ \text{(sum)}\quad\text{or}\quad"
             r"\Big(\frac{u_w}{|y_w|} - \frac{u_l}{|y_l|} - \frac{1}{2\beta}\Big)^2\ "
             r"\text{(TRL, }\mathtt{length\_average}\text{)}", logs={**TRL_LOGS, **IPO_LOGS})
def ipo(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, *, beta=0.1, length_average=False,
        chosen_len=None, rejected_len=None):
    r"""IPO: L = (h − 1/(2β))², β the paper's τ.

    `length_average=False` (default): h = Δ on summed log-probs (IPO paper eq. 17 as written; OpenRLHF
    `ipo_enable`, rlhf-book `IPOLoss`). `length_average=True`: h = u_w/|y_w| − u_l/|y_l| (TRL
    `loss_type="ipo"`, "confirmed with the IPO authors"), needing `chosen_len`, `rejected_len` [B] — the
    response token counts, > 0. The two coincide when every length is 1; otherwise the scale differs by
    roughly the length, so β must be re-tuned when switching. Lengths given with length_average=False are
    a ValueError (they would be silently unused).

    Minimizer h = 1/(2β); ∂L/∂h = 2(h − 1/(2β)) does not vanish as h → ∞ and reverses past the target.
    Metrics: TRL's rewards/* (β·u on summed log-ratios, as TRL logs them), `ipo/margin` = mean h,
    `ipo/target` = 1/(2β).
    """
    check_beta(beta)
    u_w, u_l = _margins(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp)
    if length_average:
        n_w, n_l = response_lengths(chosen_len, rejected_len, chosen_logp, "ipo(length_average=True)")
        h = u_w / n_w - u_l / n_l
    else:
        if chosen_len is not None or rejected_len is not None:
            raise ValueError("ipo got chosen_len/rejected_len with length_average=False (summed log-probs, the "
                             "paper's convention): pass length_average=True for TRL's per-token average, or "
                             "drop the lengths")
        h = u_w - u_l
    target = 1.0 / (2.0 * beta)
    loss = ((h - target) ** 2).mean()
    metrics = dpo_metrics(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, beta)
    metrics["ipo/margin"] = float(h.detach().mean())
    metrics["ipo/target"] = target
    return loss, metrics


# -------------------------------------------------------------------------------------- cdpo-robust

CDPO_FORMS = ("cdpo", "rdpo")


CDPO_LOGS = {
    "cdpo/weight": ("cDPO: mean gradient weight (1 - eps) sigma(-z) - eps sigma(z), z = beta * margin: 0 at the "
                    "finite optimum, negative past it (the rdpo form's weight stays positive).",
                    "0.5 (1 - 2 eps) = 0.4 at step 0 (eps = 0.1), falling to 0 at the finite optimum beta * margin = "
                    "ln((1 - eps)/eps) = 2.2 and negative past it, where overconfident pairs are pushed back."),
}


@registry.preference(
    "cdpo-robust", title="Provably Robust DPO: Aligning Language Models with Noisy Feedback",
    summary="DPO under label-flip rate ε: form='cdpo' label smoothing (OpenRLHF, TRL-CPO label_smoothing), "
            "form='rdpo' the unbiased robust loss (TRL loss_type='robust'). ε = 0 gives dpo.",
    equation=r"\text{cDPO: } -(1-\varepsilon)\log\sigma(\beta\Delta) - \varepsilon\log\sigma(-\beta\Delta);\quad"
             r"\text{rDPO: } \frac{-(1-\varepsilon)\log\sigma(\beta\Delta) + \varepsilon\log\sigma(-\beta\Delta)}"
             r"{1-2\varepsilon}", logs={**TRL_LOGS, **CDPO_LOGS}, choices={"form": CDPO_FORMS})
def cdpo_robust(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, *, beta=0.1, label_smoothing=0.1,
                form="cdpo"):
    r"""Label-noise-aware DPO with flip rate ε = `label_smoothing`.

    form="cdpo" (conservative DPO; OpenRLHF `label_smoothing`, TRL `CPOTrainer` sigmoid `label_smoothing`):
        L = −(1−ε)·log σ(βΔ) − ε·log σ(−βΔ), ε ∈ [0, 1]; finite optimum Δ* = log((1−ε)/ε)/β.
    form="rdpo" (robust DPO; TRL `DPOTrainer` `loss_type="robust"`):
        L = [−(1−ε)·log σ(βΔ) + ε·log σ(−βΔ)] / (1 − 2ε), ε ∈ [0, 0.5); unbiased: its expectation under
        labels flipped with probability ε is the clean DPO loss.
    ε = 0 is `dpo` for both. Default ε = 0.1 (the value the rDPO paper / TRL docs suggest).
    Metrics: TRL's rewards/*, `cdpo/weight` = mean of −∂L/∂(βΔ) (cdpo: (1−ε)σ(−βΔ) − εσ(βΔ); rdpo:
    [(1−ε)σ(−βΔ) + εσ(βΔ)]/(1−2ε)).
    """
    check_beta(beta)
    eps = float(label_smoothing)
    if form not in CDPO_FORMS:
        raise ValueError(f"cdpo-robust form must be one of {CDPO_FORMS} ('cdpo' label smoothing, 'rdpo' TRL "
                         f"robust), got {form!r}")
    if form == "cdpo" and not 0.0 <= eps <= 1.0:
        raise ValueError(f"cdpo label_smoothing must lie in [0, 1], got {eps}")
    if form == "rdpo" and not 0.0 <= eps < 0.5:
        raise ValueError(f"rdpo label_smoothing (flip rate) must lie in [0, 0.5) since the loss divides by "
                         f"1 - 2*eps, got {eps}")
    u_w, u_l = _margins(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp)
    z = beta * (u_w - u_l)
    if form == "cdpo":
        per_pair = smoothed_logistic(z, eps)
        weight = (1 - eps) * torch.sigmoid(-z.detach()) - eps * torch.sigmoid(z.detach())
    else:
        per_pair = (-(1 - eps) * F.logsigmoid(z) + eps * F.logsigmoid(-z)) / (1 - 2 * eps)
        weight = ((1 - eps) * torch.sigmoid(-z.detach()) + eps * torch.sigmoid(z.detach())) / (1 - 2 * eps)
    metrics = dpo_metrics(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, beta)
    metrics["cdpo/weight"] = float(weight.mean())
    return per_pair.mean(), metrics


# --------------------------------------------------------------------------------------------- hinge


HINGE_LOGS = {
    "hinge/active": ("Hinge: share of pairs still inside the margin (the only ones with gradient).",
                     "1 at step 0 (every margin is 0, inside 1/beta = 10 nats), falling as pairs pass the margin. At "
                     "0 no gradient is left; stuck at 1: the margins are not growing."),
}


@registry.preference(
    "hinge", title="SLiC-HF: Sequence Likelihood Calibration with Human Feedback",
    summary="hinge on the log-ratio margin. margin=None: TRL relu(1 − βΔ) (margin 1/β, slope β); margin=δ: "
            "SLiC-HF relu(δ − Δ) (slope 1). Reference-free SLiC: pass ref log-probs None.",
    equation=r"\mathcal{L} = \mathrm{relu}(1 - \beta\Delta)\ \text{(TRL)}\quad\text{or}\quad"
             r"\mathrm{relu}(\delta - \Delta)\ \text{(SLiC-HF, margin}=\delta)", logs={**TRL_LOGS, **HINGE_LOGS})
def hinge(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, *, beta=0.1, margin=None):
    r"""Hinge (SLiC) loss on Δ.

    margin=None (default, TRL `DPOTrainer` `loss_type="hinge"`): L = relu(1 − β·Δ) — zero once Δ ≥ 1/β,
    slope −β below. margin=δ (SLiC-HF's calibration loss): L = relu(δ − Δ), slope −1, β only scales the
    logged rewards; with δ = 1/β it is the TRL loss divided by β. Original SLiC-HF has no reference model:
    pass `ref_chosen_logp=ref_rejected_logp=None` (then u = logπ; its SFT regularizer is not part of this
    loss). Metrics: TRL's rewards/* (β·u), `hinge/active` = fraction of pairs below the margin (the only
    ones with a gradient).
    """
    check_beta(beta)
    if (ref_chosen_logp is None) != (ref_rejected_logp is None):
        raise ValueError("hinge needs both reference log-probs or neither (reference-free SLiC)")
    if ref_chosen_logp is None:
        ref_chosen_logp, ref_rejected_logp = torch.zeros_like(chosen_logp), torch.zeros_like(rejected_logp)
    u_w, u_l = _margins(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp)
    delta = u_w - u_l
    slack = 1 - beta * delta if margin is None else margin - delta
    per_pair = torch.relu(slack)
    metrics = dpo_metrics(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, beta)
    metrics["hinge/active"] = float((slack.detach() > 0).to(delta.dtype).mean())
    return per_pair.mean(), metrics


# --------------------------------------------------------------------------------------------- simpo

SIMPO_CONVENTIONS = (
    "SimPO has two margin conventions; give exactly one: gamma_beta_ratio=γ' (the default 0.5; SimPO repo "
    "`gamma_beta_ratio`, rlhf-book `SimPOLoss`: L = -log σ(β(Δ̄ - γ'))) or gamma_beta_ratio=None with gamma=γ "
    "(TRL CPO `simpo_gamma`, an absolute margin in logit units: L = -log σ(βΔ̄ - γ)); γ = β·γ'")


SIMPO_LOGS = {
    "logps/chosen_avg": ("SimPO: mean per-token (length-averaged) log-prob of the chosen responses.",
                         "Flat or rising towards 0 (about -0.9 per token on the smoke run). Falling along with "
                         "rejected_avg: with no reference to anchor it, the chosen answer degrades too."),
    "logps/rejected_avg": ("SimPO: mean per-token log-prob of the rejected responses.",
                           "Falling, faster than logps/chosen_avg; their gap is simpo/margin. Flat: the pairs are "
                           "not being separated."),
    "simpo/margin": ("SimPO: mean per-token log-prob margin log pi(y_w)/|y_w| - log pi(y_l)/|y_l| (before beta and "
                     "gamma).",
                     "Above gamma/beta (0.5 with the recipe's beta = 2, gamma = 1), where the loss is ln 2, and "
                     "growing. Falling below it: chosen and rejected are no longer separated per token."),
    "simpo/gamma": ("SimPO: the target reward margin gamma in use.",
                    "Constant beta * gamma_beta_ratio: 1.0 with the recipe's beta = 2 and ratio 0.5. Compare beta * "
                    "simpo/margin with it."),
}


@registry.preference(
    "simpo", title="SimPO: Simple Preference Optimization with a Reference-Free Reward",
    summary="reference-free logistic loss on length-averaged log-probs with a target margin; "
            "gamma_beta_ratio γ' (SimPO repo) XOR gamma γ = β·γ' (TRL CPO simpo_gamma).",
    equation=r"\mathcal{L} = -\log\sigma\Big(\frac{\beta}{|y_w|}\log\pi(y_w) - \frac{\beta}{|y_l|}\log\pi(y_l)"
             r" - \gamma\Big),\quad \gamma = \beta\gamma'", logs={**TRL_LOGS, **SIMPO_LOGS})
def simpo(chosen_logp, rejected_logp, ref_chosen_logp=None, ref_rejected_logp=None, *, beta=2.0,
          gamma_beta_ratio=0.5, gamma=None, label_smoothing=0.0, chosen_len=None, rejected_len=None):
    r"""SimPO: L = −log σ(β·Δ̄ − γ), Δ̄ = logπ(y_w)/|y_w| − logπ(y_l)/|y_l| (no reference model).

    The reference log-probs are accepted for the common signature and never read (they may be None).
    `chosen_len`, `rejected_len` [B] (response token counts, > 0) are required.
    Margin conventions (exactly one; see SIMPO_CONVENTIONS):
      - `gamma_beta_ratio` γ' (default 0.5 with β = 2.0, SimPO repo / rlhf-book): γ = β·γ'.
      - `gamma` γ with `gamma_beta_ratio=None` (TRL `CPOConfig(loss_type="simpo", cpo_alpha=0)`, whose
        defaults are β = 0.1, simpo_gamma = 0.5, i.e. γ' = 5): absolute margin. TRL's default cpo_alpha = 1.0
        adds CPO's NLL term on the chosen response ("CPO-SimPO"); it is not part of this loss.
    `label_smoothing` ε (TRL CPO, default 0): −(1−ε)·log σ(βΔ̄ − γ) − ε·log σ(−(βΔ̄ − γ)).
    Metrics: rewards/* = β·logπ(y)/|y| (SimPO's implicit reward, as TRL CPO logs it), rewards/accuracies
    on it, logps/* the summed policy log-probs (inputs), `logps/chosen_avg`, `logps/rejected_avg`,
    `simpo/margin` = mean Δ̄, `simpo/gamma` = γ.
    """
    check_beta(beta)
    if gamma is not None and gamma_beta_ratio is not None:
        raise ValueError(f"{SIMPO_CONVENTIONS}; got gamma={gamma} together with gamma_beta_ratio="
                         f"{gamma_beta_ratio} (set gamma_beta_ratio=None to use gamma)")
    if gamma is None and gamma_beta_ratio is None:
        raise ValueError(f"{SIMPO_CONVENTIONS}; got neither")
    g = float(gamma) if gamma is not None else beta * float(gamma_beta_ratio)
    eps = float(label_smoothing)
    if not 0.0 <= eps <= 1.0:
        raise ValueError(f"simpo label_smoothing must lie in [0, 1], got {eps}")
    check_pairs(chosen_logp, rejected_logp, names=("chosen_logp", "rejected_logp"))
    n_w, n_l = response_lengths(chosen_len, rejected_len, chosen_logp, "simpo")
    avg_w, avg_l = chosen_logp / n_w, rejected_logp / n_l
    z = beta * (avg_w - avg_l) - g
    per_pair = smoothed_logistic(z, eps)
    with torch.no_grad():
        metrics = preference_metrics(beta * avg_w, beta * avg_l, chosen_logp, rejected_logp)
        metrics["logps/chosen_avg"] = float(avg_w.mean())
        metrics["logps/rejected_avg"] = float(avg_l.mean())
        metrics["simpo/margin"] = float((avg_w - avg_l).mean())
        metrics["simpo/gamma"] = g
    return per_pair.mean(), metrics
