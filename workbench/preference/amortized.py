"""Distribution-matching and auxiliary-ranking preference objectives: BRAIn (self-normalised distillation of
the reward-conditioned posterior over n samples per prompt) and SPO's preference-degree auxiliary loss.

Both follow the list convention of `workbench.preference.listwise` where they take lists: the list is
`chosen_logp` ([B] or [B, K]) followed by `rejected_logp` ([B], [B, K'] or None).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from workbench import registry
from workbench.preference.base import (TRL_LOGS, check_beta, check_pairs, dpo_metrics, implicit_rewards,
                                       preference_metrics)
from workbench.preference.listwise import PAIR_LOSS_TYPES, as_list, check_list, pair_loss

# ---------------------------------------------------------------------------------------------- BRAIn


def brain_weights(ref_logp: torch.Tensor, rewards: torch.Tensor, proposal_logp: torch.Tensor, *,
                  beta: float = 1.0, baseline_reward: torch.Tensor | None = None) -> torch.Tensor:
    """Self-normalised importance weights of the posterior p(y|x, G=1) ∝ pi_ref(y) sigma((r - r0)/beta) over
    the n samples drawn from q: alpha_i = softmax_i(log pi_ref(y_i) + log sigma((r_i - r0)/beta) - log q(y_i)).
    All inputs [B, n]; r0 [B] (None: the mean reward of the n samples). Detached."""
    with torch.no_grad():
        r0 = rewards.mean(-1, keepdim=True) if baseline_reward is None else baseline_reward.reshape(-1, 1)
        return torch.softmax(ref_logp + F.logsigmoid((rewards - r0) / beta) - proposal_logp, dim=-1)


BRAIN_LOGS = {
    "brain/alpha_ess": ("BRAIn: effective sample size 1/sum(alpha^2) of the posterior weights over the K samples.",
                        "Between 1 and K = 4: 4 when a list's rewards tie, about 2.7 for one right answer in four at "
                        "step 0; back towards K as the policy matches the posterior. Near 1: one sample takes all."),
    "brain/alpha_max": ("BRAIn: mean largest posterior weight (1 = all mass on one sample, 1/K = uniform).",
                        "Between 1/K = 0.25 and 1: 0.25 for tied rewards, about 0.54 for one right answer in four at "
                        "step 0, back towards 0.25 as the policy matches the posterior. Near 1: weight collapse."),
}


@registry.preference(
    "brain", layout="list",
    title="BRAIn: Bayesian Reward-conditioned Amortized Inference for natural language generation from "
          "feedback",
    summary="Distil the reward-conditioned posterior pi_ref(y) p(G=1|x,y) into the policy by self-normalised "
            "importance sampling over n samples per prompt: KL(alpha || beta) between the posterior's and the "
            "policy's self-normalised weights (the self-normalised baseline zeroes the gradient at the posterior).",
    equation=r"\alpha_i = \mathrm{softmax}_i(\log\pi_{ref}(y_i) + \log\sigma(\tfrac{r_i - r_0}{\beta}) "
             r"- \log q(y_i)),\ "
             r"\beta_i = \mathrm{softmax}_i(\log\pi_\theta(y_i) - \log q(y_i)),\ L = \mathrm{KL}(\alpha\,\|\,\beta),\ "
             r"\nabla L = \sum_i(\beta_i - \alpha_i)\nabla\log\pi_\theta(y_i)", logs={**TRL_LOGS, **BRAIN_LOGS})
def brain(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, *, rewards=None, beta=1.0,
          proposal_logp=None, baseline_reward=None, hard=False):
    r"""BRAIn (Pandey et al. 2024), `abstract-only` in the catalog: the catalog's principled reading.

    Inputs (list convention): the n >= 2 samples of each prompt are the list `chosen_logp` [B, n] (+
    `rejected_logp`; a pair is n = 2), policy and reference summed log-probs. Extra keyword inputs:
      - `rewards` [B, n] (required): reward-model scores r(x, y_i) on a Bradley-Terry logit scale.
      - `beta`: reward temperature of the goodness likelihood p(G=1|x, y) = sigma((r - r0)/beta) (1.0: the
        BT reward as is). It is not DPO's beta: BRAIn matches the posterior itself.
      - `proposal_logp` [B, n]: log q of the samples (None: the detached policy, q = pi_old, on-policy).
      - `baseline_reward` [B]: r0(x) (None: the mean reward of the prompt's n samples).
      - `hard`: alpha = one-hot argmax instead of the softmax (the paper's DPO-sft limit).

    Loss: mean over prompts of KL(alpha || beta) = sum_i alpha_i (log alpha_i - log beta_i), alpha detached,
    beta_i = softmax_i(log pi_theta(y_i) - log q(y_i)); gradient sum_i (beta_i - alpha_i) grad log pi(y_i).
    Properties (tests): pi_theta equal to the posterior on the samples (up to a per-prompt constant) gives
    alpha = beta and a zero gradient; q = posterior gives uniform alpha; with n = 2, q = pi_ref and
    hard=True the loss is exactly DPO's -log sigma(u_w - u_l) at DPO beta = 1 (the paper's "DPO-sft is a
    special case of BRAIn" with argmax for softmax and two samples).
    Metrics: TRL names (beta = 1) with chosen = the highest-reward and rejected = the lowest-reward sample,
    `brain/alpha_ess` (effective sample size 1/sum alpha^2) and `brain/alpha_max`.
    """
    check_beta(beta)
    logps, ref_logps = as_list(chosen_logp, rejected_logp), as_list(ref_chosen_logp, ref_rejected_logp)
    if logps.shape != ref_logps.shape:
        raise ValueError(f"policy list has shape {tuple(logps.shape)} but reference list has "
                         f"{tuple(ref_logps.shape)}")
    check_list(logps, ref_logps, "sample set")
    if rewards is None:
        raise ValueError("brain needs rewards [B, n]: the reward-model score of every sample")
    rewards = torch.as_tensor(rewards, dtype=logps.dtype, device=logps.device)
    q = logps.detach() if proposal_logp is None else torch.as_tensor(proposal_logp, dtype=logps.dtype)
    check_pairs(logps, rewards, q, names=("sample log-probs", "rewards", "proposal_logp"))
    if baseline_reward is not None:
        baseline_reward = torch.as_tensor(baseline_reward, dtype=logps.dtype, device=logps.device)
        check_pairs(logps[:, 0], baseline_reward, names=("one column of the samples", "baseline_reward"))
    alpha = brain_weights(ref_logps.detach(), rewards.detach(), q.detach(), beta=beta,
                          baseline_reward=None if baseline_reward is None else baseline_reward.detach())
    if hard:
        alpha = F.one_hot(alpha.argmax(-1), alpha.shape[-1]).to(alpha.dtype)
    log_beta = torch.log_softmax(logps - q.detach(), dim=-1)
    loss = (torch.xlogy(alpha, alpha) - alpha * log_beta).sum(-1).mean()

    with torch.no_grad():
        best, worst = rewards.argmax(-1, keepdim=True), rewards.argmin(-1, keepdim=True)
        pick = lambda x, i: x.gather(-1, i)[:, 0]  # noqa: E731
        rc, rr = implicit_rewards(pick(logps, best), pick(logps, worst), pick(ref_logps, best),
                                  pick(ref_logps, worst), 1.0)
        metrics = preference_metrics(rc, rr, pick(logps, best), pick(logps, worst))
        metrics["brain/alpha_ess"] = float((1 / (alpha ** 2).sum(-1)).mean())
        metrics["brain/alpha_max"] = float(alpha.max(-1).values.mean())
    return loss, metrics


# ---------------------------------------------------------------------------------------------- SPO (preference degree)


def degrade_response(token_ids: torch.Tensor, key_mask: torch.Tensor, fractions, *,
                     generator: torch.Generator | None = None) -> list[torch.Tensor]:
    """Copies of a response with growing fractions of its key tokens removed (SPO's self-supervised degrees).

    token_ids [T], key_mask [T] (True = key content, e.g. RAKE keywords). The key positions are shuffled
    once; the copy for fraction f drops the first round(f * n_key) of them, so removals are nested and
    monotone in f. Returns one 1-D tensor per fraction (f = 0: the response itself).
    """
    if token_ids.dim() != 1 or key_mask.shape != token_ids.shape:
        raise ValueError(f"token_ids and key_mask must be 1-D of equal length; got {tuple(token_ids.shape)} and "
                         f"{tuple(key_mask.shape)}")
    fractions = [float(f) for f in fractions]
    if any(not (0 <= f <= 1) for f in fractions):
        raise ValueError(f"removal fractions must lie in [0, 1], got {fractions}")
    key_pos = torch.nonzero(key_mask.bool()).flatten()
    if key_pos.numel() == 0 and any(f > 0 for f in fractions):
        raise ValueError("the response has no key token to remove: cannot build degraded copies")
    order = key_pos[torch.randperm(key_pos.numel(), generator=generator)]
    out = []
    for f in fractions:
        keep = torch.ones_like(token_ids, dtype=torch.bool)
        keep[order[:round(f * key_pos.numel())]] = False
        out.append(token_ids[keep])
    return out


def degree_labels(fractions: torch.Tensor) -> torch.Tensor:
    """Preference-degree labels from removal fractions (last dim): the number of levels strictly more degraded.
    Monotone: more removal, lower label; equal fractions, equal labels."""
    f = torch.as_tensor(fractions)
    return (f[..., None, :] > f[..., :, None]).sum(-1)


SPO_PREFDEG_LOGS = {
    "spo/aux_loss": ("SPO-prefdeg: the preference-degree ranking loss over the degraded copies (before lambda).",
                     "3 ln 2 = 2.08 at step 0 (three level pairs tied at the reference), falling as the degraded "
                     "copies are ranked below the chosen answer. Rising: the copies are ranked the wrong way."),
    "spo/degree_accuracy": ("SPO-prefdeg: share of (less, more degraded) copy pairs the implicit reward orders right.",
                            "Near 0 at step 0 (all levels tie and the test is strict), rising towards 1. Stuck at "
                            "0.5 or below: the policy does not prefer full answers to ones with digits removed."),
}


@registry.preference(
    "spo-prefdeg", title="Self-supervised Preference Optimization: Enhance Your Language Model with Preference "
                         "Degree Awareness",
    summary="Alignment loss (DPO/IPO) plus lambda times a self-supervised preference-degree loss: copies of the "
            "chosen response with growing fractions of key content removed must be ranked by degree.",
    equation=r"L = L_{align}(y_w, y_l) + \lambda\sum_{d<d'} -\log\sigma\big(\beta[u(y_d) - u(y_{d'})]\big),\ "
             r"u(y) = \log\pi(y) - \log\pi_{ref}(y),\ y_0 = y_w", logs={**TRL_LOGS, **SPO_PREFDEG_LOGS},
    choices={"base": PAIR_LOSS_TYPES})
def spo_prefdeg(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, *, beta=0.1, lam=0.1,
                degraded_logp=None, ref_degraded_logp=None, degrees=None, base="sigmoid"):
    r"""SPO preference-degree auxiliary loss (Li et al. 2024), `abstract-only` in the catalog.

    Inputs: the usual pair (summed log-probs) for the alignment loss `base` ("sigmoid" = DPO, "ipo" = IPO,
    sum convention), plus keyword inputs
      - `degraded_logp`, `ref_degraded_logp` [B, D]: policy / reference log-probs of D degraded copies of
        y_w (build them with `degrade_response`; required when lam != 0),
      - `degrees` [D] or [B, D]: their removal fractions in [0, 1] (None: 1/(D+1), ..., D/(D+1), i.e.
        1/3, 2/3 for D = 2). y_w itself is degree 0.
    Loss: mean over pairs of base(y_w, y_l) + lam * sum_{d < d'} -log sigma(beta (u(y_d) - u(y_d'))) over
    all level pairs of {y_w, degraded copies} (u = log-ratio to the reference); levels with equal degree
    form no pair. lam = 0 is the base loss exactly.

    Reading (catalog `decide + reading`; the official repository holds only a license file and the paper
    text reachable here gave only its abstract and summaries: key content extracted with RAKE, removed in
    different amounts, and a self-supervised degree loss): the degree task is read as a pairwise ranking of
    the degraded copies by the policy's implicit reward, so it needs no extra classification head and is
    zero-gradient once every level is ranked by a wide margin. Levels d in {0, 1/3, 2/3}, lam = 0.1.
    Metrics: the base loss's TRL metrics, `spo/aux_loss`, `spo/degree_accuracy` (ordered level pairs
    ranked correctly).
    """
    check_beta(beta)
    if lam < 0:
        raise ValueError(f"lam must be >= 0, got {lam}")
    check_pairs(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp)
    logits = (chosen_logp - ref_chosen_logp) - (rejected_logp - ref_rejected_logp)
    base_loss = pair_loss(logits, beta, base).mean()
    metrics = dpo_metrics(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, beta)
    if degraded_logp is None and ref_degraded_logp is None:
        if lam != 0:
            raise ValueError("spo-prefdeg with lam != 0 needs degraded_logp and ref_degraded_logp [B, D] (log-probs "
                             "of the degraded copies of y_w); pass lam=0 for the base loss alone")
        return base_loss, metrics
    if degraded_logp is None or ref_degraded_logp is None:
        raise ValueError("give both degraded_logp and ref_degraded_logp")
    levels = as_list(chosen_logp, degraded_logp)                  # [B, 1 + D], column 0 = y_w (degree 0)
    ref_levels = as_list(ref_chosen_logp, ref_degraded_logp)
    if levels.shape != ref_levels.shape:
        raise ValueError(f"degraded_logp gives {tuple(levels.shape)} levels but ref_degraded_logp "
                         f"{tuple(ref_levels.shape)}")
    check_list(levels, ref_levels, "degree list")
    B, L = levels.shape
    D = L - 1
    if degrees is None:
        degrees = torch.arange(1, D + 1, dtype=levels.dtype, device=levels.device) / (D + 1)
    degrees = torch.as_tensor(degrees, dtype=levels.dtype, device=levels.device)
    if degrees.shape not in ((D,), (B, D)):
        raise ValueError(f"degrees must have shape ({D},) or ({B}, {D}), got {tuple(degrees.shape)}")
    if not bool(torch.isfinite(degrees).all()) or bool(((degrees < 0) | (degrees > 1)).any()):
        raise ValueError(f"degrees are removal fractions in [0, 1]; got {degrees.tolist()}")
    deg = torch.cat([torch.zeros(B, 1, dtype=levels.dtype, device=levels.device), degrees.expand(B, D)], -1)
    less_degraded = deg[:, :, None] < deg[:, None, :]          # [B, L, L]: level i should outrank level j
    u = levels - ref_levels
    diff = u[:, :, None] - u[:, None, :]
    aux = torch.where(less_degraded, pair_loss(diff, beta, "sigmoid"), torch.zeros_like(diff)).sum((-1, -2)).mean()
    loss = base_loss + lam * aux
    with torch.no_grad():
        metrics["spo/aux_loss"] = float(aux)
        metrics["spo/degree_accuracy"] = float((diff > 0)[less_degraded].float().mean()) \
            if bool(less_degraded.any()) else float("nan")
    return loss, metrics
