"""SDPO's self-distillation as TRL implements it, transcribed: the divergence, the tail bucket, the full-vocabulary and
teacher-top-K losses, their aggregation, and which sibling teaches which row.

Source: huggingface/trl @ f2cd57710ae345ea6428ae95363267fcf38a3dc8
    trl/experimental/sdpo/loss_utils.py     `compute_divergence` (L23-41), `add_tail_bucket` (L44-53),
                                            `compute_full_logit_self_distillation_loss` (L102-111)
    trl/experimental/sdpo/sdpo_trainer.py   `SuccessfulRolloutTeacherContextBuilder.build` (L177-259, the mining
                                            loop), `_compute_self_distillation_loss` (L1208-1287, the
                                            "full_logits" branch and the aggregation), `_compute_server_distillation_
                                            loss` (L1289-1379, the "topk_logits" branch on the teacher's support)

Variable names and the order of operations are theirs. The trainer's `self.args` become keyword arguments; the
mining loop takes the gathered rewards and the group size and returns (self_distillation_mask, demo indices) instead
of building prompts; the server path takes the teacher's top-K log-probs and ids as tensors instead of fetching them,
and the importance-sampling clip (`distillation_is_clip`) is left out (None).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def compute_divergence(student_log_probs, teacher_log_probs, alpha):
    if alpha == 0.0:
        kl = F.kl_div(student_log_probs, teacher_log_probs, reduction="none", log_target=True)
    elif alpha == 1.0:
        kl = F.kl_div(teacher_log_probs, student_log_probs, reduction="none", log_target=True)
    else:
        alpha_t = torch.tensor(alpha, dtype=student_log_probs.dtype, device=student_log_probs.device)
        mixture = torch.logsumexp(
            torch.stack([student_log_probs + torch.log(1 - alpha_t), teacher_log_probs + torch.log(alpha_t)]),
            dim=0,
        )
        kl_teacher = F.kl_div(mixture, teacher_log_probs, reduction="none", log_target=True)
        kl_student = F.kl_div(mixture, student_log_probs, reduction="none", log_target=True)
        kl = torch.lerp(kl_student, kl_teacher, alpha)
    return kl.sum(-1)


def add_tail_bucket(log_probs):
    log_s = torch.logsumexp(log_probs, dim=-1, keepdim=True)
    log_s = torch.clamp(log_s, max=-1e-7)
    tail_log = torch.log(-torch.expm1(log_s))
    return torch.cat([log_probs, tail_log], dim=-1)


def compute_full_logit_self_distillation_loss(student_logits, teacher_logits, *, distillation_alpha):
    student_log_probs = torch.log_softmax(student_logits, dim=-1)
    teacher_log_probs = torch.log_softmax(teacher_logits, dim=-1)
    return compute_divergence(student_log_probs, teacher_log_probs, distillation_alpha)


def aggregate_distillation(per_token_loss, loss_mask):
    """`_compute_self_distillation_loss`'s loss and its logged `mean_distill_loss`."""
    loss = (per_token_loss * loss_mask).sum(-1) / loss_mask.sum(-1).clamp(min=1.0)
    loss = loss.mean()
    mean_distill_loss = (per_token_loss * loss_mask).sum() / loss_mask.sum().clamp(min=1.0)
    return loss, mean_distill_loss


def full_logits_distillation_loss(student_logits, teacher_logits, completion_mask, self_distillation_mask,
                                  distillation_alpha=0.0):
    """`_compute_teacher_student_logits`' loss mask, then `_compute_self_distillation_loss` with
    distillation_mode="full_logits" (logits already divided by the temperature, as `_forward_logits` returns)."""
    loss_mask = completion_mask * self_distillation_mask.unsqueeze(1)
    per_token_loss = compute_full_logit_self_distillation_loss(student_logits, teacher_logits,
                                                               distillation_alpha=distillation_alpha)
    return aggregate_distillation(per_token_loss, loss_mask)


def server_topk_distillation_loss(student_logits, teacher_topk_logps, teacher_topk_ids, completion_mask,
                                  self_distillation_mask, distillation_alpha=0.0, distillation_add_tail=True):
    """`_compute_server_distillation_loss` with distillation_mode="topk_logits": the student projected on the
    teacher's top-K ids, both with a tail bucket (or renormalized), then the divergence."""
    loss_mask = completion_mask * self_distillation_mask.unsqueeze(1)
    required = loss_mask.bool()
    keep = required.unsqueeze(-1)
    student_topk_logps = torch.gather(torch.log_softmax(student_logits, dim=-1), dim=-1, index=teacher_topk_ids)
    student_topk_logps = torch.where(keep, student_topk_logps, torch.zeros_like(student_topk_logps))
    teacher_topk_logps = torch.where(keep, teacher_topk_logps, torch.zeros_like(teacher_topk_logps))
    if distillation_add_tail:
        student_topk_logps = add_tail_bucket(student_topk_logps)
        teacher_topk_logps = add_tail_bucket(teacher_topk_logps)
    else:
        student_topk_logps = student_topk_logps - torch.logsumexp(student_topk_logps, dim=-1, keepdim=True)
        teacher_topk_logps = teacher_topk_logps - torch.logsumexp(teacher_topk_logps, dim=-1, keepdim=True)
    per_token_loss = compute_divergence(student_topk_logps, teacher_topk_logps, distillation_alpha)
    return aggregate_distillation(per_token_loss, loss_mask)


def successful_demonstrations(all_rewards, num_generations, threshold=1.0, dont_reprompt_self=True,
                              use_successful_as_teacher=True):
    """The mining loop of `build` without environment feedback: (self_distillation_mask [B], demo index or None)."""
    total_samples = all_rewards.shape[0]
    self_distillation_mask = torch.zeros(total_samples)
    successful_demo_indices = [None] * total_samples
    for i in range(total_samples):
        group_start = (i // num_generations) * num_generations
        group_end = group_start + num_generations

        successful = []
        if use_successful_as_teacher:
            for j in range(group_start, group_end):
                if dont_reprompt_self and j == i:
                    continue
                if all_rewards[j].item() >= threshold:
                    successful.append(j)

        has_solution = len(successful) > 0
        if has_solution:
            successful_demo_indices[i] = successful[0]
        if has_solution:
            self_distillation_mask[i] = 1.0
    return self_distillation_mask, successful_demo_indices
