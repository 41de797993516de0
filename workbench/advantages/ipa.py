"""IPA (ROME): credit over interaction chunks. Chunks, per-chunk reductions and the chunk-level discounted return.

    chunk c_{i,k}   the policy tokens of turn k of row i (chunks="turn", the catalog's reading), or the k-th
                    contiguous run of mask == 1 (chunks="runs", alibaba/ROLL's reading)
    credit="trajectory" (default): A_{i,t} = (R_i - mean_g R) / (std_g R + eps)       = `grpo`, on every chunk
    credit="return"  (ROLL `agentic_reinforce`):
        u_{i,t}   = A^grpo_i at the row's last policy token + token_rewards_{i,t}       token rewards
        r_{i,k}   = sum_{t in c_{i,k}} u_{i,t}                                           chunk reward
        G_{i,k}   = r_{i,k} + gamma G_{i,k+1}                                           over the row's chunks
        A_{i,t}   = G_{i,k}  for t in c_{i,k}

Reading (`abstract-only`: the paper, arXiv 2512.24873, gives "credit over semantic interaction chunks" and no formula;
the decisions are the catalog's). Chunks are the turns' policy tokens. The default advantage is the trajectory's
group z-score, identical on every chunk (what a verifiable outcome reward supports; the chunk *ratio* is the
objective's, `workbench.objectives.ipa`). credit="return" is the chunk-level discounted return of ROLL's
`agentic_reinforce` estimator, fed, as ROLL's agentic pipeline feeds it, with the group-normalized episode reward at
the last token (`scale` as in `grpo`) plus any per-token rewards (KL in the reward). With gamma = 1 and no token
rewards it equals the default. Intermediate per-turn environment rewards reach it only through the episode return.

Authors' code: alibaba/ROLL @ 8eb27cc `roll/pipeline/agentic/utils.py::compute_agentic_reinforce_return` (chunks =
runs of `response_mask == 1`, reward read at each chunk's last token, gamma across chunks; gamma defaults to 1,
`roll/configs/base_config.py`) and `compute_segment_masked_mean` (the chunk mean of the objective's log-ratio). ROLL
names no function "IPA"; its README announces ROME "with the novel IPA algorithm", and
`examples/agentic_demo/openreward_endless_terminals_reinforce_qwen35_2b.yaml` is the "baseline without IPA chunk-level
loss". Transcribed in tests/anchors/formulas_ipa.py.

reference_bug=True reproduces ROLL's chunk reward: only the token reward at the chunk's last token counts (a per-token
reward elsewhere in the chunk, e.g. -beta KL, is dropped). chunks="runs" reproduces ROLL's chunk boundaries: a masked
token inside a turn splits it, and two turns with no observation token between them merge.
"""
from __future__ import annotations

import torch

from workbench import registry
from workbench.advantages.base import last_token_mask
from workbench.advantages.group import SCALES, grpo
from workbench.batch import RolloutBatch

IPA_TITLE = ("Let It Flow: Agentic Crafting on Rock and Roll, Building the ROME Model within an Open Agentic Learning "
             "Ecosystem")
CHUNKS = ("turn", "runs")
CREDITS = ("trajectory", "return")


def chunk_ids(mask: torch.Tensor, turn: torch.Tensor | None = None, chunks: str = "turn") -> torch.Tensor:
    """[B, T] long: the chunk index of every policy token (increasing along the row), -1 off the mask.

    "turn": the token's turn id (a response without `turn` is one chunk); "runs": the index of its contiguous run of
    mask == 1 (ROLL's segments)."""
    valid = mask > 0
    if chunks == "turn":
        if turn is None:
            return torch.where(valid, 0, -1)
        if turn.shape != mask.shape:
            raise ValueError(f"turn has shape {tuple(turn.shape)} but mask has shape {tuple(mask.shape)}")
        if bool((valid & (turn < 0)).any()):
            raise ValueError("policy tokens (mask 1) have turn id -1; pass the multi-turn rollout's `turn`, or use "
                             "chunks='runs'")
        return torch.where(valid, turn.long(), -1)
    if chunks == "runs":
        before = torch.nn.functional.pad(valid[:, :-1], (1, 0), value=False)
        starts = valid & ~before
        return torch.where(valid, starts.long().cumsum(-1) - 1, -1)
    raise ValueError(f"chunks must be one of {CHUNKS}, got {chunks!r}")


def chunk_table(x: torch.Tensor, mask: torch.Tensor, ids: torch.Tensor):
    """Per (row, chunk): ([B, C] sum of m x, [B, C] number of tokens), C = max id + 1 (at least 1)."""
    B = mask.shape[0]
    C = max(int(ids.max()) + 1, 1)
    key = (torch.arange(B, device=mask.device)[:, None] * C + ids.clamp(min=0)).flatten()
    sums = torch.zeros(B * C, dtype=x.dtype, device=x.device).index_add(0, key, (x * mask).flatten())
    counts = torch.zeros(B * C, dtype=mask.dtype, device=mask.device).index_add(0, key, mask.flatten())
    return sums.view(B, C), counts.view(B, C)


def gather_chunks(table: torch.Tensor, mask: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """[B, C] per-chunk values -> [B, T] on each chunk's tokens, 0 off the mask."""
    return table.gather(1, ids.clamp(min=0)) * mask


def chunk_mean(x: torch.Tensor, mask: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """[B, T]: the masked mean of x over each token's chunk, on the chunk's tokens (ROLL
    `compute_segment_masked_mean` for chunks='runs'); 0 off the mask."""
    sums, counts = chunk_table(x, mask, ids)
    return gather_chunks(sums / counts.clamp(min=1), mask, ids)


def chunk_rewards(u: torch.Tensor, mask: torch.Tensor, ids: torch.Tensor, last_only: bool = False):
    """([B, C] r_{i,k}, [B, C] bool chunk present): the sum of the chunk's token rewards, or (ROLL) the one at its
    last token."""
    if not last_only:
        sums, counts = chunk_table(u, mask, ids)
        return sums, counts > 0
    nxt = torch.nn.functional.pad(ids[:, 1:], (0, 1), value=-1)
    is_last = (mask > 0) & (nxt != ids)
    sums, counts = chunk_table(u, is_last.to(mask.dtype), ids)
    return sums, counts > 0


def discounted_chunk_returns(r: torch.Tensor, present: torch.Tensor, gamma: float) -> torch.Tensor:
    """[B, C] G_{i,k} = r_{i,k} + gamma G_{i,k'} with k' the row's next present chunk (0 past the last one)."""
    out = torch.zeros_like(r)
    running = torch.zeros_like(r[:, 0])
    for k in reversed(range(r.shape[1])):
        running = torch.where(present[:, k], r[:, k] + gamma * running, running)
        out[:, k] = running
    return out


def chunk_returns(u: torch.Tensor, mask: torch.Tensor, ids: torch.Tensor, gamma: float,
                  last_only: bool = False) -> torch.Tensor:
    """[B, T] the chunk-level discounted return of token rewards u [B, T], broadcast over each chunk."""
    r, present = chunk_rewards(u, mask, ids, last_only)
    return gather_chunks(discounted_chunk_returns(r, present, gamma), mask, ids)


def outcome_advantage(batch: RolloutBatch, scale: str, eps: float, allow_singletons) -> torch.Tensor:
    """[B] the group z-score of the outcome rewards alone (`grpo` on one token per row, token rewards left out)."""
    batch.require("rewards")
    one = RolloutBatch.from_rewards(batch.rewards, batch.group)
    return grpo(one, scale=scale, eps=eps, allow_singletons=allow_singletons)[:, 0]


@registry.advantage(
    "ipa", title=IPA_TITLE,
    summary="Interaction-chunk credit: one advantage per chunk (a turn's policy tokens): the trajectory's group "
            "z-score (default) or ROLL's chunk-level discounted return.",
    equation=r"A_{i,t\in c_k} = \frac{R_i - \mathrm{mean}_g R}{\mathrm{std}_g R}\ \text{or}\ "
             r"G_{i,k} = r_{i,k} + \gamma\, G_{i,k+1}",
    reads=("turn",), needs=("multi_turn",), choices={"credit": CREDITS, "chunks": CHUNKS, "scale": SCALES})
def ipa(batch: RolloutBatch, *, credit="trajectory", gamma=1.0, chunks="turn", scale="group", eps=1e-6,
        allow_singletons=False, reference_bug=False):
    """IPA advantage [B, T]. Reads `rewards` (+ `token_rewards`), `group`, `mask`, `turn` (chunks='turn').

    credit: "trajectory" (default) = `grpo(scale, eps)`, the same on every chunk; "return" = the chunk-level
    discounted return (gamma, ROLL default 1) of the token rewards u (module docstring).
    chunks: "turn" (default) or "runs" (ROLL). reference_bug: ROLL's chunk reward, read at the chunk's last token.
    allow_singletons: as `grpo` (False refuses a group of one, True gives it A = 0, "keep" verl's A = R / (1 + eps)).
    """
    if credit not in CREDITS:
        raise ValueError(f"credit must be one of {CREDITS}, got {credit!r}")
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    if credit == "trajectory":
        chunk_ids(batch.mask, batch.turn, chunks)  # checks the chunking even though every chunk gets A_i
        return grpo(batch, scale=scale, eps=eps, allow_singletons=allow_singletons)
    ids = chunk_ids(batch.mask, batch.turn, chunks)
    mask = batch.mask.double()
    u = last_token_mask(batch.mask).double() * outcome_advantage(batch, scale, eps, allow_singletons)[:, None]
    if batch.token_rewards is not None:
        u = u + batch.token_rewards.double() * mask
    return chunk_returns(u, mask, ids, gamma, last_only=reference_bug).to(batch.mask.dtype)
