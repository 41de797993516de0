"""LLDS: a likelihood-preserving penalty against Lazy Likelihood Displacement (GRPO collapse in tool use).

    preserving tokens  p_t = m_t [A_t >= 0]                         (preserve="non-negative"; "all": p_t = m_t)
    unit u             an action (a contiguous run of preserving tokens; gate="action") or a response ("response")
    gate_u             [sum_{t in u} p_t (old_t - logp_t) > 0]         the unit's likelihood decreased (detached)
    P                  = lambda agg(gate_u(t) p_t relu(old_t - logp_t))  only the tokens whose log-prob fell

Reference: vengdeng/LLDS-On-Group-Relative-Policy-Optimization-Collapse-in-Search-R1
`verl/workers/actor/dp_actor.py` (`update_policy`: `no_reduce_lambda`, `chunk_noreduce`, `chunk_sums_vectorized`,
`expand_chunk_mask`), `train_grpo_nqhot.sh`, commit c19a0942. (The catalog lists no reference implementation; this
repository, linked from the paper's model cards, has one.)
"""
from __future__ import annotations

import torch

from workbench import ops, registry

GATES = ("action", "response")
PRESERVE = ("non-negative", "all")


def runs(mask: torch.Tensor) -> torch.Tensor:
    """Run ids [B, T] long: 0 outside `mask`, 1..K on its contiguous runs in each row (`chunk_sums_vectorized`)."""
    on = mask > 0
    prev = torch.nn.functional.pad(on[:, :-1], (1, 0), value=False)
    return (on & ~prev).cumsum(dim=1) * on


def unit_ids(preserving: torch.Tensor, gate: str) -> torch.Tensor:
    """Unit ids [B, T] long: 0 outside the preserving tokens; an action per run ("action") or 1 per row."""
    return runs(preserving) if gate == "action" else (preserving > 0).long()


def fell_units(displacement: torch.Tensor, preserving: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """[B, K + 1] bool, detached: unit k of each row has sum_t p_t (old_t - logp_t) > 0 (column 0 is no unit)."""
    with torch.no_grad():
        sums = torch.zeros(ids.shape[0], int(ids.max()) + 1, dtype=displacement.dtype, device=ids.device)
        sums.scatter_add_(1, ids, displacement * preserving)
        fell = sums > 0
        fell[:, 0] = False
    return fell


def llds_penalty(logp, old_logp, advantages, mask, *, gate="action", preserve="non-negative"):
    """(relu(old - logp) on the penalized tokens [B, T], penalized [B, T] bool, share of units whose likelihood
    fell)."""
    if gate not in GATES:
        raise ValueError(f"gate must be one of {GATES}, got {gate!r}")
    if preserve not in PRESERVE:
        raise ValueError(f"preserve must be one of {PRESERVE}, got {preserve!r}")
    ops.check_mask(logp, mask, "logp")
    preserving = mask * (advantages >= 0).to(mask.dtype) if preserve == "non-negative" else mask
    displacement = old_logp.detach() - logp                      # > 0 where the token's likelihood fell
    ids = unit_ids(preserving, gate)
    fell = fell_units(displacement.detach(), preserving, ids)
    penalized = fell.gather(1, ids)                               # the gate is a constant: no gradient through it
    n_units = float(ids.amax(-1).sum())
    return torch.relu(displacement) * penalized.to(logp.dtype), penalized, float(fell.sum()) / max(n_units, 1.0)


LLDS_LOGS = {
    "llds/penalty": ("LLDS: aggregated relu(old_logp - logp) over the penalized tokens (before lambda).",
                     "0 on the first minibatch of an on-policy step (logp = old), about 0.01 afterwards on the test "
                     "runs. Growing: the update keeps lowering the likelihood of good responses (LLD)."),
    "llds/fell_frac": ("LLDS: share of preserving units (actions of A >= 0 tokens) whose summed log-likelihood fell "
                       "during the update.",
                       "0 with one minibatch and one epoch (logp = old); 0.15 to 0.4 of the preserving actions on "
                       "the test runs (2 minibatches or 2 epochs). Near 1: likelihood displacement everywhere, the "
                       "death spiral's first phase."),
    "llds/token_frac": ("LLDS: share of valid tokens carrying the likelihood-preserving penalty.",
                        "Below llds/fell_frac (only the tokens that fell, of A >= 0 actions that fell). Rising with "
                        "grad_norm: the collapse LLDS is meant to stop."),
}


@registry.regularizer(
    "llds", title="On GRPO Collapse in Search-R1: The Lazy Likelihood-Displacement Death Spiral",
    summary="lambda x agg(relu(old - logp)) on the non-negative-advantage tokens of actions (or responses) whose "
            "total likelihood fell during the update; 0 elsewhere.",
    equation=r"P = \lambda\,\mathrm{agg}\Big(\big[\textstyle\sum_{s\in u(t)} p_s(\log\pi_{old,s} - \log\pi_{\theta,s})"
             r" > 0\big]\,p_t\,[\log\pi_{old,t} - \log\pi_{\theta,t}]_+\Big),\ p_t = m_t[A_t \ge 0]",
    reads=("old_logp", "advantages"), logs=LLDS_LOGS, choices={"gate": GATES, "preserve": PRESERVE})
def llds(forward, batch, *, agg="token-mean", denom=None, coef=0.1, gate="action", preserve="non-negative"):
    """LLDS on the training forward's log-probs [B, T] against `batch.old_logp`.

    Our reading (the catalog marks it abstract-only; the released code settles it): `coef` (lambda) 0.1 from the
    catalog (`train_grpo_nqhot.sh` uses `no_reduce_lambda` 0.2); the preserving set is the tokens with A >= 0
    (`positive_advantage_mask = advantages >= 0`), i.e. the correct, at-or-above-group-mean responses the death
    spiral is about, and not all responses; `preserve="all"` gives the catalog's literal formula. The unit is the
    action (a contiguous run of preserving tokens: `chunk_noreduce=true`, the A-gate the script and README
    recommend); `gate="response"` is the R-gate. The reference aggregates with a token mean over the micro-batch
    (`masked_mean(weighted_penalty, response_mask)`); here the recipe's `agg`.

    old_logp = logp on the first minibatch of an on-policy step, so the penalty only acts on later minibatches
    and epochs. Metrics: `llds/penalty` (agg of the penalty, before lambda), `llds/fell_frac` (share of preserving
    units whose likelihood fell), `llds/token_frac` (share of valid tokens with a non-zero penalty).
    """
    if coef < 0:
        raise ValueError(f"coef must be >= 0, got {coef}")
    batch.require("old_logp", "advantages")
    per_token, _, fell = llds_penalty(forward.logp, batch.old_logp, batch.advantages, batch.mask, gate=gate,
                                      preserve=preserve)
    penalty = ops.aggregate(per_token, batch.mask, agg, denom)
    with torch.no_grad():
        token_frac = float(ops.masked_mean((per_token > 0).to(batch.mask.dtype), batch.mask))
    return coef * penalty, {"llds/penalty": penalty.item(), "llds/fell_frac": fell, "llds/token_frac": token_frac}
