"""AHPO's gate and expert rows (MM-HELIX, arXiv 2510.08540): each group whose on-policy samples hold fewer than R_hat
successes gets the prompt's expert trace as one more row, which only the SFT term (`regularizer:ahpo`) trains on.

    s_g  = #{i in g on-policy : score_i >= 1}          the verifier's successes (R(tau_i) = 1; the loop's `accuracy`)
    xi_g = [s_g < R_hat]                                R_hat = 1: all-fail groups only (the card's reading)
    xi_g = 1  ->  group g gets the row y*(x_g): the task's expert actions replayed through its environment and
                  encoded as a sampled episode (LUFFY's `reference_batch`), scored by the verifier,
                  offpolicy_mask = its action tokens, mask = 0 (and mu_logp 0 off the mask)

mask = 0 keeps the expert row out of every part that trains on the policy's tokens (the GRPO loss and its
denominators, a KL term, entropy statistics) and offpolicy_mask marks it for the SFT term; `advantage:ampo` (the
on-policy-only group z-score) keeps its reward out of the group's mean and std, so the sampled rows' advantages are
GRPO's exactly. The gate is decided here because it needs whole groups: the update's minibatches split them.

No reference implementation is public; the paper trains a multimodal model on expert chains of thought. At toy scale
the expert trace is the task's exact one (a one-turn task's target, a multi-turn task's expert actions).
"""
from __future__ import annotations

from dataclasses import replace

import torch

from workbench import registry
from workbench.batch import RolloutBatch, concat, on_policy_rows
from workbench.regularizers.ahpo import AHPO_TITLE
from workbench.rollout.offpolicy_guidance import reference_batch
from workbench.transforms.vspo import total

AHPO_GATE_LOGS = {
    "ahpo/gated_groups": ("AHPO: share of the step's groups with fewer than R_hat successes (xi = 1), which received "
                          "their expert trace for the SFT term.",
                          "Falls over training as the policy solves prompts alone (near 1 at the start of a run from "
                          "scratch on a hard task). Stuck at 1: the expert traces are not being learnt."),
}


def check_ahpo_gate(*, r_hat=1, **_) -> None:
    if isinstance(r_hat, bool) or not isinstance(r_hat, int) or r_hat < 0:
        raise ValueError(f"r_hat={r_hat!r} is the success count below which a group gets its expert trace: give an "
                         "integer >= 0 (the card's 1: all-fail groups; 0: never, plain GRPO; above group_size: "
                         "always, the static-coefficient variant)")


def successes(scores: torch.Tensor, group: torch.Tensor, on_policy: torch.Tensor) -> dict[int, int]:
    """{group id: its on-policy rows with score >= 1}, every group of the batch (ascending ids)."""
    won = (scores >= 1.0) & on_policy.to(scores.device)
    return {int(g): int(won[group == g].sum()) for g in group.unique()}


def gate(n_successes: int, r_hat: int) -> bool:
    """xi: the group gets expert supervision iff it has fewer than r_hat successes."""
    return n_successes < r_hat


def expert_rows(ctx, groups: list[int]) -> RolloutBatch:
    """One row per group id in `groups`: the expert trace of `ctx.examples[g]` (`reference_batch`, replayed with the
    seed index G, which no sampled row of the group used), `group` g, `scores` the verifier's, offpolicy_mask its
    action tokens and mask 0 (mu_logp 0 with it: nothing reads the behaviour log-probs of a row the policy loss
    leaves out)."""
    rows = reference_batch(ctx.engine, ctx.task, [ctx.examples[g] for g in groups], index=ctx.group_size,
                           temperature=1.0)
    none = torch.zeros_like(rows.mask)
    return replace(rows, group=torch.tensor(groups, dtype=torch.long), scores=rows.rewards.clone(), mask=none,
                   mu_logp=none.clone(), offpolicy_mask=rows.mask.clone())


@registry.group_transform(
    "ahpo", title=AHPO_TITLE,
    summary="AHPO's gate: each group with fewer than R_hat = 1 successes among its samples gets the prompt's expert "
            "trace as an extra row, marked off-policy and left out of the policy loss (mask 0) and of the baseline, "
            "for regularizer:ahpo's SFT term.",
    equation=r"\xi_g = \Big[\textstyle\sum_{i\in g}\mathbb{1}[R(\tau_i) = 1] < \hat R\Big],\quad "
             r"\xi_g = 1 \Rightarrow g \leftarrow g \cup \{y^\star(x_g)\},\ m^{\mathrm{off}} = 1,\ m = 0",
    reads=("scores", "group"), provides=("offpolicy_mask",), needs=("solution",), logs=AHPO_GATE_LOGS,
    check=check_ahpo_gate)
def ahpo_gate(batch, ctx, *, r_hat=1):
    """Reads the verifier's `scores` [B] and `group`; appends one expert row per gated group (each group's rows kept
    together, the expert row last) and fills `offpolicy_mask` [B, T] (0 on the sampled rows). Uses `ctx.task` (the
    expert actions), `ctx.engine` (replaying and encoding them), `ctx.examples` (group g answers ctx.examples[g]).
    Logs ahpo/gated_groups."""
    check_ahpo_gate(r_hat=r_hat)
    if batch.offpolicy_mask is None:
        batch = replace(batch, offpolicy_mask=torch.zeros_like(batch.mask))
    counts = successes(batch.scores, batch.group, on_policy_rows(batch))
    gated = [g for g, n in counts.items() if gate(n, r_hat)]
    ctx.metrics["ahpo/gated_groups"] = total(ctx, len(gated)) / max(total(ctx, len(counts)), 1.0)
    if not gated:
        return batch
    both = concat([batch, expert_rows(ctx, gated)], pad_id=ctx.pad_id)
    return both.select(torch.argsort(both.group, stable=True))
