"""SRPO's distillation half against TRL's SDPO (formulas_sdpo.py, huggingface/trl @ f2cd577): the full-vocabulary
forward KL and its aggregation with the gradient, the teacher-top-K loss with its tail bucket, and which sibling
teaches which failed row. Where SRPO routes, TRL distils every row with a successful sibling, correct ones too."""
import pytest
import torch

from tests.anchors.formulas_sdpo import (full_logits_distillation_loss, server_topk_distillation_loss,
                                         successful_demonstrations)
from tests.helpers import AGREE_TOL, D, anchor_mask, assert_agree, seeded
from workbench import ops
from workbench.objectives.srpo_route import SDPO, srpo_route
from workbench.transforms.srpo_teacher import routes

pytestmark = pytest.mark.covers("srpo-route")


def distilled(seed: int, B=5, T=6, V=11):
    """Every row routed to SDPO: student logits leaf [B, T, V] (already / temperature), teacher logits, a mask with
    holes, and the objective's other inputs (its GRPO branch is unused)."""
    g = seeded(seed)
    mask = anchor_mask(B, T, g, holes=True)
    student = torch.randn(B, T, V, generator=g, dtype=D).requires_grad_(True)
    teacher = 2 * torch.randn(B, T, V, generator=g, dtype=D)
    ids = torch.randint(V, (B, T), generator=g)
    logp = torch.log_softmax(student, -1).gather(-1, ids[..., None]).squeeze(-1)
    return student, teacher, mask, dict(logp=logp, old_logp=logp.detach(), advantages=torch.zeros_like(logp),
                                        route=torch.full((B,), SDPO))


@pytest.mark.parametrize("seed", range(4))
def test_full_vocabulary_distillation_is_trls_forward_kl_full_logits_loss(seed):
    """beta = 0 (TRL has no entropy weight) and TRL's aggregation, the per-row token mean then the mean over rows:
    the loss, its gradient on the student logits, and the logged mean KL."""
    student, teacher, mask, inputs = distilled(seed)
    teacher_logp = torch.log_softmax(teacher, -1) * mask[..., None]  # stored 0 off the mask
    H = ops.entropy_from_logits(teacher).to(D) * mask
    ours, metrics = srpo_route(inputs["logp"], inputs["old_logp"], inputs["advantages"], mask, logits=student,
                               route=inputs["route"], teacher_logp=teacher_logp, teacher_ids=None, teacher_entropy=H,
                               beta=0.0, agg="seq-mean-token-mean")
    theirs, mean_distill_loss = full_logits_distillation_loss(student, teacher, mask, torch.ones(len(mask), dtype=D),
                                                              distillation_alpha=0.0)
    assert_agree(ours, theirs, student)
    assert metrics["srpo/distill_kl"] == pytest.approx(float(mean_distill_loss.detach()), rel=1e-10)


@pytest.mark.parametrize("seed, k", [(0, 1), (1, 3), (2, 10)])
def test_top_k_distillation_is_trls_teacher_support_loss_with_a_tail_bucket(seed, k):
    student, teacher, mask, inputs = distilled(seed)
    top, ids = (torch.log_softmax(teacher, -1) * mask[..., None]).topk(k, dim=-1)
    ours, _ = srpo_route(inputs["logp"], inputs["old_logp"], inputs["advantages"], mask, logits=student,
                         route=inputs["route"], teacher_logp=top, teacher_ids=ids,
                         teacher_entropy=torch.zeros_like(mask), beta=0.0, agg="seq-mean-token-mean")
    theirs, _ = server_topk_distillation_loss(student, top, ids, mask, torch.ones(len(mask), dtype=D),
                                              distillation_alpha=0.0, distillation_add_tail=True)
    assert_agree(ours, theirs, student, **AGREE_TOL)


@pytest.mark.parametrize("seed", range(6))
def test_a_failed_rows_teacher_is_trls_first_successful_sibling(seed):
    """TRL's mining loop (contiguous groups of G, reward >= 1): our SDPO rows are its distilled rows that failed, each
    taught by TRL's demonstration; its correct rows with a successful sibling are GRPO's here (the routing)."""
    G, g = 4, seeded(seed)
    rewards = (torch.rand(5 * G, generator=g) < 0.4).double()
    mask, demos = successful_demonstrations(rewards, G)
    correct = rewards >= 1.0
    route, sibling = routes(correct, torch.arange(5).repeat_interleave(G))
    assert torch.equal(route == SDPO, (mask > 0) & ~correct)
    assert [int(sibling[i]) for i in range(5 * G) if route[i] == SDPO] == \
        [demos[i] for i in range(5 * G) if route[i] == SDPO]
