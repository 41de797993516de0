"""Proximal / reference-moving preference methods: P3O (pairwise PPO), APO (Nesterov-extrapolated reference
for iterative DPO/IPO) and SALSA (a weight-space soup as the KL reference).

    p3o(y1_logp, y2_logp, ref_y1_logp, ref_y2_logp, *, chosen_reward, rejected_reward, ...)   pairwise PPO
    apo_accelerated(chosen, rejected, ref_chosen, ref_rejected, *, prev_ref_chosen_logp, ...) DPO/IPO on
        the extrapolated reference  extrapolated_reference(ref_t, ref_{t-1}, alpha)
    salsa(logp[B, T], soup_ref_logp[B, T], mask[B, T], ...)  KL-to-soup penalty; the soup itself is
        soup_state_dict(state_dicts, weights) / soup_model(models, weights)

Log-probs of P3O and APO are per-sequence sums over response tokens ([B]); SALSA works per token like the
`kl-penalty` regularizer it re-references.
"""
from __future__ import annotations

import copy
import math
from typing import Mapping, Sequence

import torch

from workbench import kl, ops, registry
from workbench.objectives.ppo import CLIP_LOGS
from workbench.preference.base import TRL_LOGS, check_beta, check_pairs, dpo_metrics
from workbench.preference.listwise import PAIR_LOSS_TYPES, pair_loss
from workbench.regularizers.kl_penalty import kl_in_loss, kl_in_reward

# ---------------------------------------------------------------------------------------------- P3O


def _clipped_term(ratio: torch.Tensor, adv: torch.Tensor, eps: float):
    """PPO's -min(rho A, clip(rho) A) per pair, the active-clip mask and the out-of-band mask."""
    clipped = ratio.clamp(1 - eps, 1 + eps)
    unclipped_obj, clipped_obj = ratio * adv, clipped * adv
    active = clipped_obj < unclipped_obj
    return -torch.minimum(unclipped_obj, clipped_obj), active, (ratio - 1).abs() > eps


P3O_LOGS = {
    "p3o/advantage_abs": ("P3O: mean |A|, A = half the KL-regularized reward difference of the pair, driving each "
                          "pair's gradient.",
                          "Exactly 0.5 at step 0 with the verified pairs (rewards 1 and 0, no KL yet), then slowly "
                          "falling as beta times the log-ratio margin eats into the gap; 0 at a margin of 1/beta = "
                          "10."),
    "p3o/kl": ("P3O: mean sequence-level log pi_old - log pi_sft over both responses, the KL term folded into the "
               "reward (before beta).",
               "0 at step 0 (policy = SFT model). On these fixed offline pairs it is a log-ratio, not a KL, and can "
               "go well below 0. Large in size: the policy has left the SFT model far behind."),
}


P3O_VARIANTS = ("separate", "joint")  # P3O-V1 (a clipped ratio per response) and P3O-V2 (one pair ratio)


@registry.preference(
    "p3o", title="Pairwise Proximal Policy Optimization: Harnessing Relative Feedback for LLM Alignment",
    summary="PPO on pairs: the advantage of y1 is half the reward difference (invariant to per-prompt reward "
            "shifts), sequence-level ratios clipped per response (V1 'separate') or as one pair ratio "
            "(V2 'joint'); KL to the SFT model in the reward.",
    equation=r"A = \tfrac12(\tilde r_1 - \tilde r_2),\ \tilde r_k = r_k - \beta\,\mathrm{sg}(\log\pi_{old}(y_k) - "
             r"\log\pi_{SFT}(y_k));\ \text{V1: } \ell = -\sum_k \min(\rho_k A_k, \mathrm{clip}(\rho_k)A_k),\ "
             r"\text{V2: } \rho = \rho_1/\rho_2",
    logs={**TRL_LOGS, **{k: CLIP_LOGS[k] for k in ("clip/region", "clip/out_of_band")}, **P3O_LOGS},
    choices={"variant": P3O_VARIANTS})
def p3o(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, *, chosen_reward=None,
        rejected_reward=None, old_chosen_logp=None, old_rejected_logp=None, beta=0.1, eps=0.2,
        variant="separate"):
    r"""P3O (Wu et al. 2023): pairwise policy gradient with PPO-style sequence-level clipping.

    Inputs: `chosen_logp`, `rejected_logp` are the current policy's summed log-probs of the two sampled
    responses y1, y2 of each prompt (P3O needs no order: "chosen"/"rejected" are just y1/y2); the `ref_*`
    are the SFT model's (for the KL-in-reward term). Extra keyword inputs:
      - `chosen_reward`, `rejected_reward` [B] (required): reward-model scores r1, r2.
      - `old_chosen_logp`, `old_rejected_logp` [B]: the sampling policy's log-probs (None: the detached
        current ones, i.e. the first epoch on fresh samples, rho = 1).

    Reading (catalog `decide + reading`; the paper's exact V1/V2 forms are not known to the catalog):
      r~_k = r_k - beta * sg(log pi_old(y_k) - log pi_SFT(y_k))   (sequence-level k1 KL in the reward)
      A = (r~_1 - r~_2) / 2 for y1 and -A for y2;  rho_k = exp(log pi(y_k) - log pi_old(y_k))
      V1 "separate": l = -sum_k min(rho_k A_k, clip(rho_k, 1 - eps, 1 + eps) A_k)
      V2 "joint":    one pair ratio rho = rho_1 / rho_2, and the clipped pair objective averaged over both
                     orderings of the pair, (y1, y2) and (y2, y1) (rho -> 1/rho, A -> -A):
                     l = -1/2 [min(rho A, clip(rho) A) + min(-A / rho, -clip(1 / rho) A)],
                     which keeps the loss symmetric in the two responses like V1 (our reading).
    At rho = 1 both give the pairwise policy gradient A * grad(log pi(y1) - log pi(y2)). The loss is the
    mean over pairs. Defaults beta = 0.1, eps = 0.2, variant "separate" are `unverified`.
    Metrics: `clip/region` (active-clip fraction), `clip/out_of_band` (|rho - 1| > eps), `p3o/advantage_abs`,
    `p3o/kl` (mean sequence-level log pi_old - log pi_SFT), and the TRL reward metrics with beta = 1
    relative to the SFT model.
    """
    if chosen_reward is None or rejected_reward is None:
        raise ValueError("p3o needs chosen_reward and rejected_reward (the reward-model scores of y1 and y2)")
    if not (eps > 0):
        raise ValueError(f"eps must be > 0, got {eps}")
    if beta < 0:
        raise ValueError(f"beta (KL coefficient) must be >= 0, got {beta}")
    old1 = chosen_logp.detach() if old_chosen_logp is None else old_chosen_logp.detach()
    old2 = rejected_logp.detach() if old_rejected_logp is None else old_rejected_logp.detach()
    r1, r2 = (torch.as_tensor(r, dtype=chosen_logp.dtype, device=chosen_logp.device)
              for r in (chosen_reward, rejected_reward))
    check_pairs(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, old1, old2, r1, r2,
                names=("chosen_logp", "rejected_logp", "ref_chosen_logp", "ref_rejected_logp", "old_chosen_logp",
                       "old_rejected_logp", "chosen_reward", "rejected_reward"))
    with torch.no_grad():
        kl1, kl2 = old1 - ref_chosen_logp.detach(), old2 - ref_rejected_logp.detach()
        adv = ((r1.detach() - beta * kl1) - (r2.detach() - beta * kl2)) / 2
    logr1, logr2 = chosen_logp - old1, rejected_logp - old2
    if variant == "separate":
        l1, a1, o1 = _clipped_term(torch.exp(logr1), adv, eps)
        l2, a2, o2 = _clipped_term(torch.exp(logr2), -adv, eps)
        per_pair = l1 + l2
        active, out = torch.cat([a1, a2]), torch.cat([o1, o2])
    elif variant == "joint":
        l12, a1, o1 = _clipped_term(torch.exp(logr1 - logr2), adv, eps)
        l21, a2, o2 = _clipped_term(torch.exp(logr2 - logr1), -adv, eps)
        per_pair = (l12 + l21) / 2
        active, out = torch.cat([a1, a2]), torch.cat([o1, o2])
    else:
        raise ValueError(f"unknown variant {variant!r}; choose 'separate' (P3O-V1) or 'joint' (P3O-V2)")
    loss = per_pair.mean()
    metrics = dpo_metrics(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, 1.0)
    metrics.update({"clip/region": float(active.float().mean()), "clip/out_of_band": float(out.float().mean()),
                    "p3o/advantage_abs": float(adv.abs().mean()), "p3o/kl": float(torch.cat([kl1, kl2]).mean())})
    return loss, metrics


# ---------------------------------------------------------------------------------------------- APO


def extrapolated_reference(ref_logp_t: torch.Tensor, ref_logp_t_minus_1: torch.Tensor,
                           alpha: float = 0.3) -> torch.Tensor:
    """Nesterov extrapolation of the reference in log space (APO):

        log pi~_t(y) = (1 + alpha) log pi^_t(y) - alpha log pi^_{t-1}(y)     (+ c(x), dropped)

    pi^_t is the solution of iteration t (the ordinary iterative-DPO reference), pi^_{t-1} the one before.
    Unnormalised: the per-prompt constant cancels in DPO/IPO margins. alpha = 0 gives pi^_t back.
    """
    if not (isinstance(alpha, (int, float)) and math.isfinite(alpha) and alpha >= 0):
        raise ValueError(f"alpha (momentum) must be a finite number >= 0, got {alpha!r}")
    check_pairs(ref_logp_t, ref_logp_t_minus_1, names=("ref_logp_t", "ref_logp_t_minus_1"))
    return (1 + alpha) * ref_logp_t - alpha * ref_logp_t_minus_1


APO_LOGS = {
    "apo/ref_shift": ("APO: mean |log pi~_t - log pi^_t|, how far momentum moved the reference (0 = iterative DPO).",
                      "Float noise (about 1e-7) in the first iteration (steps 0 to 4, no earlier solution yet), then "
                      "alpha = 0.3 times how far one iteration moved the log-probs. Growing: momentum compounds."),
}


@registry.preference(
    "apo-accelerated", title="Accelerated Preference Optimization for Large Language Model Alignment",
    summary="Iterative DPO (or IPO) as a proximal-point method with Nesterov momentum: each iteration's "
            "reference is the last solution extrapolated away from the one before; alpha = 0 is iterative DPO.",
    equation=r"\log\tilde\pi_t = (1+\alpha)\log\hat\pi_t - \alpha\log\hat\pi_{t-1};\ "
             r"L = -\log\sigma\big(\beta[(\log\pi(y_w) - \log\tilde\pi_t(y_w)) - "
             r"(\log\pi(y_l) - \log\tilde\pi_t(y_l))]\big)", logs={**TRL_LOGS, **APO_LOGS},
    choices={"loss_type": PAIR_LOSS_TYPES})
def apo_accelerated(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, *, beta=0.1, alpha=0.3,
                    prev_ref_chosen_logp=None, prev_ref_rejected_logp=None, loss_type="sigmoid"):
    r"""APO (He, Yuan, Gu 2024): DPO/IPO against the Nesterov-extrapolated reference.

    Inputs: `ref_*` are log pi^_t, the previous iteration's solution (what iterative DPO would use as the
    reference); extra keyword inputs `prev_ref_chosen_logp`, `prev_ref_rejected_logp` [B] are
    log pi^_{t-1}, the solution one iteration earlier (None at the first iteration: no momentum yet, plain
    DPO against ref). The loss is `loss_type` ("sigmoid" = DPO, "ipo" = IPO, sum convention) of
    Delta = [log pi(y_w) - log pi~_t(y_w)] - [log pi(y_l) - log pi~_t(y_l)] with log pi~_t from
    `extrapolated_reference`.

    Reading (catalog: `unverified` form, alpha not known): the affine log-space extrapolation above, which
    is the unnormalised pi~ ∝ pi^_t (pi^_t / pi^_{t-1})^alpha; normalisation is unnecessary because c(x)
    cancels in Delta. alpha = 0.3 is the catalog's default "to be confirmed". alpha = 0 is iterative DPO.
    (SPPO-style bases would need the normalised reference and are not wired here.)
    Metrics: TRL names with implicit rewards against the extrapolated reference; `apo/ref_shift` is the
    mean |log pi~_t - log pi^_t| over both responses.
    """
    check_beta(beta)
    if (prev_ref_chosen_logp is None) != (prev_ref_rejected_logp is None):
        raise ValueError("give both prev_ref_chosen_logp and prev_ref_rejected_logp (log pi^_{t-1}) or neither")
    check_pairs(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp)
    if prev_ref_chosen_logp is None:
        ref_c, ref_r = ref_chosen_logp, ref_rejected_logp
    else:
        check_pairs(ref_chosen_logp, prev_ref_chosen_logp, prev_ref_rejected_logp,
                    names=("ref_chosen_logp", "prev_ref_chosen_logp", "prev_ref_rejected_logp"))
        ref_c = extrapolated_reference(ref_chosen_logp, prev_ref_chosen_logp, alpha)
        ref_r = extrapolated_reference(ref_rejected_logp, prev_ref_rejected_logp, alpha)
    logits = (chosen_logp - ref_c) - (rejected_logp - ref_r)
    loss = pair_loss(logits, beta, loss_type).mean()
    metrics = dpo_metrics(chosen_logp, rejected_logp, ref_c, ref_r, beta)
    with torch.no_grad():
        metrics["apo/ref_shift"] = float(torch.cat([(ref_c - ref_chosen_logp).abs(),
                                                    (ref_r - ref_rejected_logp).abs()]).mean())
    return loss, metrics


# ---------------------------------------------------------------------------------------------- SALSA


def soup_state_dict(state_dicts: Sequence[Mapping[str, torch.Tensor]],
                    weights: Sequence[float] | None = None) -> dict[str, torch.Tensor]:
    """Weight-space average sum_m w_m theta_m of checkpoints with identical keys and shapes (a model soup).

    weights: None = uniform (SALSA's soup of two SFT models: 1/2, 1/2); otherwise one weight >= 0 per
    checkpoint, summing to 1. Floating tensors are averaged in float64 as theta_0 + sum_m w_m (theta_m -
    theta_0), so the soup of identical checkpoints is exactly that checkpoint, then cast back to their dtype;
    non-floating buffers (integer ids, bool masks) must be equal across checkpoints and are copied.
    """
    if not state_dicts:
        raise ValueError("soup_state_dict needs at least one state dict")
    n = len(state_dicts)
    w = [1.0 / n] * n if weights is None else [float(x) for x in weights]
    if len(w) != n:
        raise ValueError(f"{len(w)} weights for {n} state dicts")
    if any(not math.isfinite(x) or x < 0 for x in w) or abs(sum(w) - 1) > 1e-9:
        raise ValueError(f"soup weights must be finite, >= 0 and sum to 1; got {w}")
    keys = list(state_dicts[0].keys())
    for i, sd in enumerate(state_dicts[1:], 1):
        if set(sd.keys()) != set(keys):
            diff = sorted(set(sd.keys()) ^ set(keys))[:5]
            raise ValueError(f"state dict {i} has different keys from state dict 0 (e.g. {diff})")
    out = {}
    for k in keys:
        tensors = [sd[k] for sd in state_dicts]
        shape = tensors[0].shape
        if any(t.shape != shape for t in tensors):
            raise ValueError(f"parameter {k!r} has shapes {[tuple(t.shape) for t in tensors]} across checkpoints")
        if tensors[0].is_floating_point():
            # theta_0 + sum_m w_m (theta_m - theta_0) (= sum_m w_m theta_m as sum w = 1): exact when the
            # checkpoints are identical or the weight is all on theta_0
            base = tensors[0].detach().to(torch.float64)
            acc = base + sum(wi * (t.detach().to(torch.float64) - base) for wi, t in zip(w[1:], tensors[1:]))
            out[k] = acc.to(tensors[0].dtype)
        else:
            if any(not torch.equal(t, tensors[0]) for t in tensors[1:]):
                raise ValueError(f"non-floating buffer {k!r} differs across checkpoints: cannot average it")
            out[k] = tensors[0].clone()
    return out


def interpolated_state_dict(theta_a: Mapping[str, torch.Tensor], theta_b: Mapping[str, torch.Tensor],
                            alpha: float = 0.5) -> dict[str, torch.Tensor]:
    """alpha theta_a + (1 - alpha) theta_b, alpha in [0, 1]: alpha = 1 is the standard reference theta_a,
    alpha = 0.5 SALSA's soup."""
    if not (0 <= alpha <= 1):
        raise ValueError(f"alpha must lie in [0, 1], got {alpha}")
    return soup_state_dict([theta_a, theta_b], [alpha, 1 - alpha])


def soup_model(models: Sequence[torch.nn.Module], weights: Sequence[float] | None = None) -> torch.nn.Module:
    """A frozen copy of models[0] carrying the soup of all the models' weights (the SALSA reference)."""
    if not models:
        raise ValueError("soup_model needs at least one model")
    soup = copy.deepcopy(models[0])
    soup.load_state_dict(soup_state_dict([m.state_dict() for m in models], weights))
    return soup.eval().requires_grad_(False)


def salsa(logp, soup_ref_logp, mask, *, beta=0.05, estimator="k1", placement="reward", agg="token-mean"):
    r"""SALSA (2024): the `kl-penalty` regularizer re-referenced to a model soup (the registered component is the
    reference builder `salsa`, workbench/references/soup.py; this is its KL term written out).

    Inputs (per token, not pairs: SALSA is a reference construction, not a pairwise loss): `logp` [B, T] of
    the policy, `soup_ref_logp` [B, T] of the soup model (build it with `soup_model` / `soup_state_dict`),
    `mask` [B, T] response mask.
      - placement "reward" (PPO, the paper's setting): returns the per-token reward penalty
        -beta * k_t [B, T] (no gradient), to add to the token rewards before the advantage.
      - placement "loss": returns beta * agg(k_t), a scalar with gradient (GRPO-style KL in the loss).
    Returns (penalty, metrics) with `kl/soup` the masked mean per-token estimate.

    Reading (catalog `partial`, `unverified` details): soup = uniform average of the two SFT checkpoints
    (alpha = 0.5), policy initialised at the soup so the KL starts at 0; beta = 0.05 and estimator k1
    (TRL PPO's KL-in-reward) are workbench defaults, not read from the paper. `interpolated_state_dict`
    with alpha = 1 recovers the standard single-SFT reference.
    """
    if beta < 0:
        raise ValueError(f"beta must be >= 0, got {beta}")
    check_pairs(logp, soup_ref_logp, mask, names=("logp", "soup_ref_logp", "mask"))
    if not bool((mask != 0).any()):
        raise ValueError("mask is all zero: no response token to take the KL to the soup over")
    if placement == "reward":
        penalty = kl_in_reward(logp, soup_ref_logp, mask, beta=beta, estimator=estimator)
        value = ops.masked_mean(kl.estimate(logp.detach(), soup_ref_logp.detach(), estimator), mask)
    elif placement == "loss":
        penalty, value = kl_in_loss(logp, soup_ref_logp, mask, beta=beta, estimator=estimator, agg=agg)
    else:
        raise ValueError(f"unknown placement {placement!r}; choose 'reward' (PPO) or 'loss'")
    return penalty, {"kl/soup": float(value)}
