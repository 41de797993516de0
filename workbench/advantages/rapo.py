"""RAPO's reward-aware advantage scaling (Fathom-DeepResearch): the advantages of the previous estimator in the chain,
scaled so that the samples that carry a signal keep the gradient mass of the whole set.

    A_i <- A_i * N / max(1, #{j in S : A_j != 0})        S = the scope of row i, N = |S|

scope "batch" (default): S = the batch (this process's rows).  scope "group": S = the group of row i (N = G).

Why the batch is the default (a decision; the card writes G / #non-zero, the brief "in the group"): under GRPO with a
0/1 verifier every row of a group with mixed outcomes has A != 0 (no reward equals the group mean), and a group with one
outcome has A = 0 throughout, so the per-group factor is G/G = 1 or multiplies zeros: the identity. The paper's stated
purpose, "preserves gradient magnitude under sparse rewards", is the batch-level effect: when most groups fail
throughout, their rows contribute zero to a token- or sequence-mean loss and the update shrinks by the share of
signal-carrying rows; N / #non-zero undoes that shrinkage (as DAPO's dynamic sampling does by resampling, here without
new rollouts). The group scope is kept for rewards that are not 0/1 (a row exactly at its group's mean gets A = 0).

A row "carries a signal" when some token of its response mask has A != 0 (exactly: GRPO gives an all-equal group exact
zeros, `group_mean`). Under data parallelism the advantage stage sees one rank's rows, so the batch scope counts that
rank's (single-process runs: the whole batch). No reference implementation (the released code is inference-only).
"""
from __future__ import annotations

import torch

from workbench import registry
from workbench.advantages.group import group_index
from workbench.batch import RolloutBatch

RAPO_TITLE = "Fathom-DeepResearch: Unlocking Long Horizon Information Retrieval and Synthesis for SLMs"

SCOPES = ("batch", "group")


def check_rapo_scaling(*, scope="batch", **_) -> None:
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {SCOPES} (the set whose non-zero rows keep its gradient mass), got "
                         f"{scope!r}")


def signal_rows(advantages: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[B] bool: the row has a trained token with a non-zero advantage."""
    return ((advantages != 0) & (mask > 0)).any(-1)


def scale_factors(nonzero: torch.Tensor, group: torch.Tensor, scope: str) -> torch.Tensor:
    """[B] N_S / max(1, #non-zero rows of S) for the scope S of each row."""
    if scope == "batch":
        return torch.full(nonzero.shape, nonzero.numel() / max(int(nonzero.sum()), 1), dtype=torch.float64)
    dense, counts = group_index(group)
    hits = torch.zeros(counts.shape[0], dtype=torch.float64).index_add_(0, dense, nonzero.double())
    return (counts.double() / hits.clamp(min=1))[dense]


@registry.advantage(
    "rapo", title=RAPO_TITLE,
    summary="RAPO's reward-aware advantage scaling: the chain's advantages times N / max(1, #rows with A != 0), over "
            "the batch (default; under 0/1 rewards the per-group factor is 1) or each group, so sparse rewards do "
            "not shrink the update.",
    equation=r"A_i \leftarrow A_i\,\frac{|S|}{\max(1, \#\{j \in S: A_j \neq 0\})}",
    reads=("advantages", "group"), choices={"scope": SCOPES}, check=check_rapo_scaling)
def rapo_scaling(batch: RolloutBatch, *, scope="batch"):
    """A [B, T]: `batch.advantages` (the previous estimator's, e.g. grpo) times the row's factor. Reads
    `advantages`, `group`, `mask`."""
    check_rapo_scaling(scope=scope)
    if batch.advantages is None:
        raise ValueError("advantage:rapo scales the advantages of the estimator before it in the chain: put one first "
                         "(advantage=['grpo', 'rapo'])")
    factors = scale_factors(signal_rows(batch.advantages, batch.mask), batch.group, scope)
    return batch.advantages * factors[:, None].to(batch.advantages.dtype)
