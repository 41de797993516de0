"""XRPO's novelty sharpening: a bonus on the advantages of correct responses the policy found unlikely.

    s(y_i)   = (1/|y_i|) sum_t log pi_theta(y_{i,t} | x, y_{i,<t})      sequence mean log-likelihood (old_logp)
    eta_i    = exp(s(y_i) - mean_g s)                                   < 1: less likely than the group's average
    A+_{i,t} = A_{i,t} + min(max(lambda (1 - eta_i), 0), kappa A_{i,t})  correct responses (R_i > threshold)
    A+_{i,t} = A_{i,t}                                                  incorrect responses

A correct answer the policy rarely samples ("novel") gets its advantage raised, by at most kappa times itself, so
rare right solutions are reinforced more than the ones the policy already favours; eta >= 1 (at least as likely
as the group's average) gets nothing. lambda = 0 leaves the chain's advantages unchanged (= `grpo`).

Source (`partial`): the official code (UIUC-MLSys/XRPO) is not available here; the formula is the catalog's, which
follows a third-party reimplementation (Wodlfvllf/grpo-composer @ 41bda31
`grpo_composer/core/advantages/novelty_sharpening.py`), and no authors' code was compared. That file is not
self-consistent (its `configs/papers/xrpo.yaml` describes A + lambda max(s - kappa, 0) instead) and departs from
the catalog in two places, where we follow the catalog: it gives every response the bonus, capped by
kappa |A| (so wrong answers are pushed up too), and averages log-probs over the padded length.
Readings chosen (the catalog leaves them open):
  - s is averaged over the response's policy tokens (the mask) of `old_logp`, the log-probs of the policy that
    sampled (pi_theta when the advantage is computed); mean_g s is over all G responses of the group;
  - the cap kappa A applies where A > 0; a correct response with A <= 0 (possible only with graded rewards, a
    correct answer below its group's mean) gets no bonus, so lambda = 0 is exactly the input, and no sign flips;
  - an advantage-chain entry (reads `batch.advantages`), after `grpo`; per token, so it also works after token-level
    estimators. Defaults lambda = 1, kappa = 0.5 are the catalog's start values (the paper's are not known).
"""
from __future__ import annotations

import torch

from workbench import ops, registry
from workbench.advantages.base import sequence_rewards
from workbench.advantages.group import group_stats
from workbench.batch import RolloutBatch

XRPO_TITLE = "XRPO: Pushing the limits of GRPO with Targeted Exploration and Exploitation"


def sequence_loglik(logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """s [B] = mean of logp over each row's policy tokens (0 for an empty row)."""
    return ops.masked_mean(logp.double(), mask.double(), dim=-1)


def novelty(s: torch.Tensor, group: torch.Tensor) -> torch.Tensor:
    """eta [B] = exp(s_i - mean_g s): below 1 for responses less likely than their group's average."""
    mean, _, _ = group_stats(s, group)
    return torch.exp(s - mean)


def check_sharpening(*, lam=1.0, kappa=0.5, **_) -> None:
    if not (lam >= 0 and kappa >= 0):
        raise ValueError(f"xrpo-sharpening: lam and kappa must be >= 0 (a bonus, capped at kappa A), got lam={lam}, "
                         f"kappa={kappa}")


def sharpening_bonus(advantages: torch.Tensor, eta: torch.Tensor, correct: torch.Tensor, *, lam=1.0,
                     kappa=0.5) -> torch.Tensor:
    """[B, T] min(max(lam (1 - eta), 0), kappa A) on correct rows where A > 0; 0 elsewhere."""
    raw = (lam * (1.0 - eta)).clamp(min=0.0)[:, None].to(advantages.dtype)
    cap = kappa * advantages.clamp(min=0.0)
    return torch.minimum(raw, cap) * correct[:, None].to(advantages.dtype)


@registry.advantage(
    "xrpo-sharpening", title=XRPO_TITLE,
    summary="Raises the advantage of correct responses that are less likely than their group's average by "
            "min(lambda (1 - eta), kappa A), eta = exp(s - mean_g s), s the sequence mean log-likelihood.",
    equation=r"A^+_i = A_i + \min\!\big(\max(\lambda(1 - \eta_i), 0),\ \kappa A_i\big),\quad "
             r"\eta_i = e^{s(y_i) - \bar s},\ s(y) = \tfrac{1}{|y|}\sum_t \log\pi_\theta(y_t\mid\cdot)",
    reads=("advantages", "old_logp"), check=check_sharpening)
def xrpo_sharpening(batch: RolloutBatch, *, lam=1.0, kappa=0.5, threshold=0.5):
    """The chain's `advantages` [B, T] plus the novelty bonus (module docstring). Reads `old_logp`, `mask`,
    `group`, `rewards` (+ summed `token_rewards`: correct = R > threshold, 0.5 for 0/1 verifiers).

    lam (lambda_novelty) and kappa (the cap, a fraction of A) must be >= 0; lam = 0 or kappa = 0 is no bonus.
    """
    check_sharpening(lam=lam, kappa=kappa)
    batch.require("advantages", "old_logp")
    eta = novelty(sequence_loglik(batch.old_logp, batch.mask), batch.group)
    correct = sequence_rewards(batch) > threshold
    bonus = sharpening_bonus(batch.advantages, eta, correct, lam=lam, kappa=kappa)
    return batch.advantages + bonus * batch.mask.to(bonus.dtype)
