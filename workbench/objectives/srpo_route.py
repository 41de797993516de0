"""SRPO's sample routing: correct samples get GRPO's clipped surrogate, failed samples that have a self-teacher get
SDPO's distillation towards it, failed samples without one fall back to GRPO; one token mean over all of them.

    c_i  = 1[score_i >= 1]                                   sample i is correct (the verifier's score)
    m_i  = 1[some sibling j of i's group is correct]         a self-teacher signal exists for i
    z_i  = (1 - c_i) m_i                                     route: 1 -> SDPO, 0 -> GRPO
    q_t  = sg(pi_old(. | x_i (+) y_j, y_{i,<t}))             the self-teacher: the same model with the correct sibling
                                                             y_j in its prompt, scoring row i's own tokens
    KL_t = sum_v q_t(v) (log q_t(v) - log pi_theta(v | x_i, y_{i,<t}))      forward KL over the whole vocabulary
    w_t  = exp(-beta H(q_t)) / mean_{s in SDPO tokens} exp(-beta H(q_s))    entropy-aware weight, mean 1, beta = 1
    l_t  = w_t KL_t                                          tokens of rows with z_i = 1
    l_t  = -min(r_t A_t, clip(r_t, 1 - eps, 1 + eps) A_t)    tokens of rows with z_i = 0 (GRPO advantages)
    loss = sum_t l_t / |tokens|                              one token mean over the union (the recipe's agg)

    d l_t / d u_t = w_t (pi_theta(. | s_t) - q_t)            u_t the student's logits / temperature at t

A failed sample carries little GRPO signal when its whole group failed and only a negative advantage otherwise; a
correct sibling in context tells the model what was wrong, token by token: the teacher's distribution on the failed
sample's own tokens is a dense target. Correct samples keep the on-policy GRPO update, which distillation towards a
teacher that mostly agrees with them would add little to. High-entropy teacher positions are the ones where the
feedback did not make the teacher sure: their targets are weighed down.

Batch fields, filled before the update by the group transform `srpo-route` (`workbench/transforms/srpo_teacher.py`):
`route` [B] (0 GRPO on a correct row, 1 SDPO, 2 GRPO fallback on a failed row without a teacher: z_i = [route = 1]),
`teacher_logp` [B, T, K] and `teacher_ids` (K = V: the whole vocabulary, ids None; or its top K), `teacher_entropy`
[B, T]; and, at the update, `logits` [B, T, V], the trainer's live logits / temperature of the training forward
(`Trainer.minibatch_loss`, filled because this objective reads them).

Sources. The paper (arXiv 2604.02288) is read from its abstract only; its official code is not located
(/work/shared/REFERENCES-AGENTS.md). The catalog card's secondary reading (a third-party verl fork) gives the weight
w ∝ exp(-beta H_teacher) normalized to mean 1 over SDPO tokens and the shared token denominator. The distillation
half follows SDPO as TRL implements it: huggingface/trl @ f2cd57710ae345ea6428ae95363267fcf38a3dc8,
`trl/experimental/sdpo/loss_utils.py` (`compute_divergence` with distillation_alpha = 0: F.kl_div(student, teacher,
log_target=True) summed over the vocabulary, the forward KL here; `add_tail_bucket`;
`compute_full_logit_self_distillation_loss`) and `sdpo_trainer.py` (`SuccessfulRolloutTeacherContextBuilder.build`:
the teacher prompt from the first successful sibling; `_compute_teacher_student_logits`: teacher and student logits
over the completion, divided by the temperature; `_compute_server_distillation_loss`: the top-K path on the teacher's
support with a tail bucket). tests/anchors/formulas_sdpo.py transcribes them.

Choices, and why:
- Forward KL over the full vocabulary (the card's decision): TRL's `distillation_alpha=0.0` with
  `distillation_mode="full_logits"`. TRL's default, the sampled-token reverse KL, is not used.
- The teacher is the policy before the update, computed once per step (a no-grad forward in the group transform):
  the stop-gradient is then exact across minibatches and epochs. TRL offers the live student, its initial weights
  or an EMA (default); the abstract says "self-teacher", and the policy before the update is the live student of the
  rollout.
- w_t is normalized over the SDPO tokens of the minibatch the loss is computed on (per rank under data
  parallelism), so its mean is exactly 1 wherever it is applied; with no SDPO token there is nothing to normalize
  and the distillation term is absent (no 0 / 0). beta = 0 gives w = 1.
- Storage (`topk` of the transform): K = V by default, the exact forward KL, at B·T·V·4 bytes: 0.5 MB for the smoke
  preset's tiny-model batch (128 rows x 10 tokens x 100 ids), 200 MB for the `small` preset's SmolLM2 batch (32 x 32
  x 49152), 10 GB for the `full` preset's Qwen batch (256 x 64 x 151936): give `topk` there (64 ids: 13 MB with
  their ids). With top K the KL is taken on the teacher's K most likely ids plus one tail bucket holding the rest of
  each distribution's mass (TRL's teacher-support top-K path with `distillation_add_tail=True`); merging ids can only
  lower a KL, so this is a lower bound, exact at K = V.
- No importance correction of the distillation term (TRL's `distillation_is_clip=2.0`): the card has none, and with
  one optimizer step per batch the ratio it would multiply by is 1.
- The GRPO branch is `ppo-clip` itself (`ppo_clip_per_token`) with the same defaults, so with every row routed to
  GRPO the objective is ppo-clip exactly (catalog test 1).
"""
from __future__ import annotations

import math

import torch

from workbench import ops, registry
from workbench.objectives.ppo import CLIP_LOGS, check_inputs, clip_metrics, ppo_clip_per_token

SRPO_TITLE = "Unifying Group-Relative and Self-Distillation Policy Optimization via Sample Routing"
GRPO_CORRECT, SDPO, GRPO_FALLBACK = 0, 1, 2  # the codes of `RolloutBatch.route`
TAIL_CAP = -1e-7  # log of the most mass K ids may hold: the tail keeps >= ~1e-7, finite (TRL's `add_tail_bucket`)

SRPO_LOGS = {
    "srpo/distill_token_frac": ("SRPO: share of the minibatch's trained tokens routed to self-distillation.",
                                "Follows the share of failed rows with a correct sibling: 0 when no group mixes "
                                "right and wrong answers, falling as the task is solved."),
    "srpo/distill_kl": ("SRPO: mean forward KL(teacher || policy) over the self-distillation tokens, unweighted "
                        "(0 without any).",
                        "Small (a teacher is the same model with a hint) and falling as the policy absorbs the "
                        "feedback; rising: the policy moves away from what the hint suggests."),
    "srpo/teacher_entropy": ("SRPO: mean full-vocabulary entropy of the self-teacher over the self-distillation "
                             "tokens (0 without any).",
                             "Below the policy's own entropy: the correct sibling in context makes the teacher "
                             "surer; near the policy's: the teacher ignores the hint."),
}


def check_beta(beta) -> float:
    """beta must be a finite number >= 0: exp(-beta H) weighs confident teacher positions up."""
    if isinstance(beta, bool) or not isinstance(beta, (int, float)) or not math.isfinite(beta) or beta < 0:
        raise ValueError(f"beta={beta!r}: the entropy weight exp(-beta H_teacher) needs a finite beta >= 0 (1: the "
                         "catalog's; 0: every self-distillation token weighs 1)")
    return float(beta)


def with_tail(logp: torch.Tensor) -> torch.Tensor:
    """[..., K] log-probs of K ids -> [..., K + 1] with a last bucket log(1 - sum exp) for the rest of the mass (the
    K ids' mass capped at exp(TAIL_CAP), so the bucket is never empty and its log is finite)."""
    inside = torch.logsumexp(logp, dim=-1, keepdim=True).clamp(max=TAIL_CAP)
    return torch.cat([logp, torch.log(-torch.expm1(inside))], dim=-1)


def forward_kl(teacher_logp: torch.Tensor, student_logp: torch.Tensor) -> torch.Tensor:
    """KL(q || p) = sum_v q(v) (log q(v) - log p(v)) over the last dim: [..., K] x2 -> [...]."""
    return (teacher_logp.exp() * (teacher_logp - student_logp)).sum(-1)


def entropy_weights(entropy: torch.Tensor, beta: float) -> torch.Tensor:
    """w = exp(-beta H) / mean exp(-beta H) over the N tokens of `entropy` [N]: N softmax(-beta H), which never
    overflows nor divides 0 by 0."""
    return torch.softmax(-beta * entropy, dim=0) * entropy.numel()


def distillation(logits, teacher_logp, teacher_ids, teacher_entropy, sdpo, beta: float):
    """(w KL [B, T], KL [B, T]) on the self-distillation tokens `sdpo` [B, T] (bool), 0 elsewhere. Only those
    positions' logits [N, V] go through the softmax: the rest of the minibatch costs nothing here."""
    zeros = torch.zeros(sdpo.shape, dtype=torch.promote_types(logits.dtype, torch.float32), device=logits.device)
    if not bool(sdpo.any()):
        return zeros, zeros
    student = torch.log_softmax(logits[sdpo].to(zeros.dtype), dim=-1)       # [N, V]
    teacher = teacher_logp[sdpo].to(zeros.dtype)                            # [N, K]
    if teacher_ids is not None:  # the teacher's top K: the student on the same ids, each with its tail bucket
        student, teacher = with_tail(student.gather(-1, teacher_ids[sdpo])), with_tail(teacher)
    kl = forward_kl(teacher, student)                                       # [N]
    w = entropy_weights(teacher_entropy[sdpo].to(zeros.dtype), beta)        # [N], mean 1
    return zeros.masked_scatter(sdpo, w * kl), zeros.masked_scatter(sdpo, kl.detach())


def check_routed_inputs(logp, logits, route, teacher_logp, teacher_ids, teacher_entropy) -> None:
    """The routed inputs' shapes against logp's [B, T], each refused by name."""
    B, T = logp.shape
    if logits is None:
        raise ValueError("srpo-route reads the training forward's logits (`logits`), which are None: it runs under "
                         "the trainer, which fills them for an objective that reads them")
    if route.shape != (B,):
        raise ValueError(f"route has shape {tuple(route.shape)}, expected [B] = ({B},)")
    for name, x in (("logits", logits), ("teacher_logp", teacher_logp), ("teacher_entropy", teacher_entropy)):
        if tuple(x.shape[:2]) != (B, T):
            raise ValueError(f"{name} has shape {tuple(x.shape)}; its first dims must be logp's {(B, T)}")
    if teacher_ids is not None and teacher_ids.shape != teacher_logp.shape:
        raise ValueError(f"teacher_ids has shape {tuple(teacher_ids.shape)} but teacher_logp "
                         f"{tuple(teacher_logp.shape)}")


@registry.objective(
    "srpo-route", title=SRPO_TITLE,
    summary="Per-sample routing: correct rows get GRPO's clipped surrogate, failed rows with a correct sibling distil "
            "towards the same model prompted with that sibling (forward KL over the vocabulary, weighted exp(-beta "
            "H_teacher) normalized to mean 1), failed rows without one fall back to GRPO; one token mean.",
    equation=r"\ell_t = z_i\,w_t\,\mathrm{KL}\big(\mathrm{sg}(\pi_{\mathrm{teacher}}) \,\|\, \pi_\theta\big)_t "
             r"+ (1 - z_i)\,\ell^{\mathrm{PPO}}_t,\quad z_i = (1 - c_i) m_i,\quad "
             r"w_t = \frac{e^{-\beta H_t}}{\mathrm{mean}_{\mathrm{SDPO}}\, e^{-\beta H}}",
    reads=("logits", "route", "teacher_logp", "teacher_ids", "teacher_entropy"), logs={**CLIP_LOGS, **SRPO_LOGS})
def srpo_route(logp, old_logp, advantages, mask, *, logits, route, teacher_logp, teacher_ids, teacher_entropy,
               agg="token-mean", denom=None, beta=1.0, eps_low=0.2, eps_high=0.2, logr_clamp=None):
    """Reads `logits` [B, T, V] (live, logits / temperature), `route` [B], `teacher_logp` [B, T, K], `teacher_ids`
    [B, T, K] or None, `teacher_entropy` [B, T]. beta: the entropy weight's (1; 0 weighs every token 1); eps_low,
    eps_high, logr_clamp: the GRPO branch's, as ppo-clip's.

    Metrics: PPO clip fractions over the GRPO tokens (over all tokens when the minibatch has none),
    srpo/distill_token_frac, srpo/distill_kl (unweighted), srpo/teacher_entropy (0 without SDPO tokens)."""
    beta = check_beta(beta)
    check_inputs(logp, old_logp, advantages, mask)
    check_routed_inputs(logp, logits, route, teacher_logp, teacher_ids, teacher_entropy)
    sdpo = (route == SDPO)[:, None] & (mask > 0)                            # [B, T] z_i on the valid tokens
    grpo, r, _ = ppo_clip_per_token(logp, old_logp, advantages, eps_low=eps_low, eps_high=eps_high,
                                    logr_clamp=logr_clamp)
    weighted, kl = distillation(logits, teacher_logp, teacher_ids, teacher_entropy, sdpo, beta)
    loss = ops.aggregate(torch.where(sdpo, weighted.to(grpo.dtype), grpo), mask, agg, denom)
    grpo_mask = mask * (~sdpo).to(mask.dtype)
    metrics = clip_metrics(r.detach(), advantages, grpo_mask if bool(grpo_mask.any()) else mask, eps_low, eps_high)
    distilled = sdpo.to(mask.dtype)
    with torch.no_grad():
        metrics["srpo/distill_token_frac"] = float(ops.masked_mean(distilled, mask))
        metrics["srpo/distill_kl"] = float(ops.masked_mean(kl, distilled)) if bool(sdpo.any()) else 0.0
        metrics["srpo/teacher_entropy"] = (float(ops.masked_mean(teacher_entropy, distilled)) if bool(sdpo.any())
                                           else 0.0)
    return loss, metrics
