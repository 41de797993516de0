"""AHPO (MM-HELIX, arXiv 2510.08540): GRPO plus an SFT term on the prompt's expert trace, switched on only where the
policy's own group has fewer than R_hat successes.

    J_AHPO = J_GRPO + xi * sum_t log pi_theta(y*_t | x, y*_<t)        y* the expert trace of the prompt
    xi     = [ sum_{i=1}^{N_on} [R(tau_i) = 1] < R_hat ]                 per group, from its on-policy rows

This module is the SFT half, as a regularizer:

    L_sft = coef * ( - sum_{i,t} e_{i,t} logp_{i,t} ) / sum_{i,t} e_{i,t}     token mean over the expert tokens
    e_{i,t} = [offpolicy_mask_{i,t} > 0] [mask_{i,t} = 0]                     expert tokens the policy loss leaves out

The expert rows come from `group_transform:ahpo` (`workbench/transforms/ahpo_expert.py`): it appends the expert trace
to each gated group (xi = 1) with offpolicy_mask = its action tokens and mask = 0, so the policy loss, its
denominators, the KL term and the advantage's baseline never see it and only this term trains on it. The gate is
decided there, on whole groups, before the update splits the batch into minibatches; a group with xi = 0 has no expert
row, so this term is 0 on it and the step is GRPO's.

No reference implementation is public (the catalog card). Where the paper is silent (the card's reading): R_hat = 1
(expert supervision for all-fail groups only), the SFT term a token mean over the optimizer step's expert tokens with
weight 1.0 (`coef`).
"""
from __future__ import annotations

import math

import torch

from workbench import ops, registry

AHPO_TITLE = ("MM-HELIX: Boosting Multimodal Long-Chain Reflective Reasoning with Holistic Platform and Adaptive "
              "Hybrid Policy Optimization")

AHPO_SFT_LOGS = {
    "ahpo/sft_loss": ("AHPO: the SFT term (coef x token-mean NLL of the expert traces of gated groups), averaged over "
                      "minibatches; 0 on a minibatch without expert tokens.",
                      "Positive while groups fail (gated), falling as the policy learns the traces; 0 once every "
                      "group reaches R_hat successes. Rising while gated: the expert traces are being unlearnt."),
}


def check_ahpo_sft(*, coef=1.0, **_) -> None:
    if not (isinstance(coef, (int, float)) and math.isfinite(coef) and coef >= 0):
        raise ValueError(f"coef={coef!r} weighs AHPO's SFT term on the expert traces: give a finite number >= 0 "
                         "(the card's 1.0; 0 turns the term off)")


def expert_tokens(batch) -> torch.Tensor:
    """[B, T] the tokens only the SFT term trains on: marked off-policy and outside the policy loss's mask."""
    batch.require("offpolicy_mask")
    return ((batch.offpolicy_mask > 0) & (batch.mask <= 0)).to(batch.mask.dtype)


def sft_loss(logp: torch.Tensor, expert: torch.Tensor, denom: ops.Denominators | None = None) -> torch.Tensor:
    """-sum(expert * logp) / (the optimizer step's expert tokens): summed over the data-parallel ranks through
    `denom.total`, at least 1, so a minibatch without expert tokens gives 0 (with a gradient of 0)."""
    count = expert.sum()
    count = denom.total(count) if denom is not None else count
    return -ops.masked_sum(logp, expert) / count.clamp(min=1)


@registry.regularizer(
    "ahpo", title=AHPO_TITLE,
    summary="AHPO's SFT term: coef x token-mean NLL of the expert traces that group_transform:ahpo appended to the "
            "groups with fewer than R_hat successes (offpolicy_mask 1, mask 0: no other loss trains on them).",
    equation=r"\mathcal{L} = -\xi_g\,\frac{c}{N^\star}\sum_t \log\pi_\theta(y^\star_t\mid x, y^\star_{<t}),\quad "
             r"\xi_g = \Big[\textstyle\sum_{i\in g}\mathbb{1}[R(\tau_i) = 1] < \hat R\Big]",
    reads=("offpolicy_mask",), logs=AHPO_SFT_LOGS, check=check_ahpo_sft)
def ahpo_sft(forward, batch, *, agg="token-mean", denom=None, coef=1.0):
    """coef x the token-mean NLL of the minibatch's expert tokens (`expert_tokens`: offpolicy_mask > 0 where mask = 0)
    under the training forward's log-probs [B, T]. The card fixes the SFT normalization to a token mean over the
    expert tokens, whatever the recipe's `agg` (which aggregates the GRPO term). Logs ahpo/sft_loss."""
    check_ahpo_sft(coef=coef)
    expert = expert_tokens(batch)
    loss = coef * sft_loss(forward.logp, expert, denom)
    return loss, {"ahpo/sft_loss": loss.item()}
