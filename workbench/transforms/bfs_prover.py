"""BFS-Prover-V2's tactic-level filter: train on the central band of tactic perplexity, and its plateau detector.

    lp(u)  = -mean_{t in u} log pi(y_t | s_t)           log-perplexity of a tactic u (a step of a row)
    band   = [Q_{q_lo}(lp), Q_{q_hi}(lp)] over the step's tactics (q = 0.1 / 0.9; edges rounded outwards to
             tactics' values, so a small batch always keeps one)
    keep u iff lp(u) in band: the low tail (trivial tactics) and the high tail (noisy ones) are not trained on.

No reference implementation located (zeyu-zheng/BFS-Prover-V2 holds the search and planner inference code only);
the abstract says tactic perplexity is roughly Gaussian and both tails are dropped, and that the model is retrained
from the base checkpoint when performance plateaus. The band's quantiles and the plateau's patience are the
catalog's reading (`abstract-only`).
"""
from __future__ import annotations

from dataclasses import replace

import torch

from workbench import registry

BFS_TITLE = "Scaling up Multi-Turn Off-Policy RL and Multi-Agent Tree Search for LLM Step-Provers"

BFS_LOGS = {
    "bfs/kept_tactics": ("BFS-Prover-V2: share of the step's tactics (steps with policy tokens) inside the "
                         "perplexity band, trained on.",
                         "About q_hi - q_lo (0.8); far lower: many tactics share the band's edge values."),
    "bfs/band_low": ("BFS-Prover-V2: the band's lower edge, the q_lo quantile of tactic log-perplexity (nats per "
                     "token).",
                     "Moves with the policy; falling towards 0: the easy tactics grow certain."),
    "bfs/band_high": ("BFS-Prover-V2: the band's upper edge, the q_hi quantile of tactic log-perplexity (nats per "
                      "token).",
                      "Above bfs/band_low; rising: the policy's tactics grow noisier."),
}


def tactic_units(batch) -> tuple[torch.Tensor, torch.Tensor]:
    """([B, T] long unit id per token, -1 off the policy's tokens; [U] row of each unit). A unit is a (row, step)
    pair of the row's `turn` ids with at least one policy token, or the whole row when the batch has no `turn`."""
    policy = batch.mask > 0
    step = batch.turn.clamp(min=0) if batch.turn is not None else torch.zeros_like(batch.mask, dtype=torch.long)
    width = int(step.max()) + 1 if step.numel() else 1
    key = torch.arange(batch.size)[:, None] * width + step       # distinct per (row, step)
    used, dense = torch.unique(key[policy], return_inverse=True)
    units = torch.full(batch.mask.shape, -1, dtype=torch.long)
    units[policy] = dense
    return units, used // width


def log_perplexity(logp: torch.Tensor, units: torch.Tensor, n_units: int) -> torch.Tensor:
    """[U] mean negative log-prob over each unit's tokens (`units` [B, T] ids, -1 outside every unit)."""
    inside = units >= 0
    nll = torch.zeros(n_units, dtype=torch.float64).index_add_(0, units[inside], -logp[inside].double())
    count = torch.zeros(n_units, dtype=torch.float64).index_add_(0, units[inside],
                                                                 torch.ones(int(inside.sum()), dtype=torch.float64))
    return nll / count


def perplexity_band(lp: torch.Tensor, q_lo: float = 0.1, q_hi: float = 0.9) -> tuple[float, float]:
    """(lower, upper) edges of the band of log-perplexities `lp` [U]: the q_lo quantile rounded down to a tactic's
    value and the q_hi quantile rounded up to one (`torch.quantile` interpolation "lower" / "higher": the sorted
    values at floor(q_lo (U - 1)) and ceil(q_hi (U - 1))), so the band always holds a tactic, however few."""
    lp = lp.double()
    return (float(torch.quantile(lp, q_lo, interpolation="lower")),
            float(torch.quantile(lp, q_hi, interpolation="higher")))


def plateaued(history, patience: int = 3, min_delta: float = 0.0) -> bool:
    """Has the evaluation score `history` (oldest first) gone `patience` evaluations without improving on its best
    by more than `min_delta`? BFS-Prover-V2 retrains from the base checkpoint then (the catalog's patience 3)."""
    if not (isinstance(patience, int) and patience >= 1):
        raise ValueError(f"patience must be a whole number >= 1 (evaluations without improvement), got {patience!r}")
    best, since = None, 0
    for score in history:
        if best is None or score > best + min_delta:
            best, since = score, 0
        else:
            since += 1
    return since >= patience


def check_bfs(*, q_lo=0.1, q_hi=0.9, **_) -> None:
    if not 0 <= q_lo < q_hi <= 1:
        raise ValueError(f"the band needs 0 <= q_lo < q_hi <= 1 (quantiles of tactic log-perplexity; the catalog's "
                         f"0.1 and 0.9), got q_lo={q_lo}, q_hi={q_hi}")


@registry.group_transform(
    "bfs-prover-v2", title=BFS_TITLE,
    summary="Tactic-level perplexity filter: each step's log-perplexity under the policy that sampled it, the "
            "step's tactics outside the [10 %, 90 %] quantile band of the batch (trivial and noisy ones) are not "
            "trained on. At our scale: a tactic is a turn of a multi-turn episode (the whole response on a one-turn "
            "task), its perplexity the rollout's own log-probs (mu_logp, at the sampling temperature); the "
            "plateau-triggered retraining from the base checkpoint is not run (plateaued() is the detector).",
    equation=r"\ell(u) = -\tfrac{1}{|u|}\sum_{t \in u} \log \pi(y_t \mid s_t),\quad \text{train on } u \iff "
             r"Q_{q_{lo}}(\ell) \le \ell(u) \le Q_{q_{hi}}(\ell)",
    reads=("mask", "mu_logp", "turn"), logs=BFS_LOGS, check=check_bfs)
def bfs_prover(batch, ctx, *, q_lo=0.1, q_hi=0.9):
    """Reads `mask`, `mu_logp` (the rollout's log-probs: the current policy's at the sampling temperature) and
    `turn` (the step of each token; absent: one unit per row). A tactic outside the band has its tokens taken out
    of `mask` (and `mu_logp`, 0 off the mask); a row left with none is dropped. The band is taken over every
    rank's tactics (`ctx.gather_objects`), so the ranks filter alike.
    At our scale, the paper's expert iteration (SFT on the (state, tactic) pairs of found proofs, reward +1) is
    the recipe's policy gradient on the kept tactics, and its retraining from the base checkpoint when evaluation
    plateaus is not run: `plateaued(history, patience=3)` is the detector a longer run would call.
    Logs bfs/kept_tactics, bfs/band_low, bfs/band_high."""
    check_bfs(q_lo=q_lo, q_hi=q_hi)
    batch.require("mu_logp")
    units, unit_row = tactic_units(batch)
    n_units = int(unit_row.numel())
    if n_units == 0:
        return batch
    lp = log_perplexity(batch.mu_logp, units, n_units)
    low, high = perplexity_band(torch.tensor(ctx.gather_objects(lp.tolist()), dtype=torch.float64), q_lo, q_hi)
    keep_unit = (lp >= low) & (lp <= high)
    keep_token = (units >= 0) & keep_unit[units.clamp(min=0)]
    mask = batch.mask * keep_token.to(batch.mask.dtype)
    out = replace(batch, mask=mask, mu_logp=batch.mu_logp * keep_token.to(batch.mu_logp.dtype))
    rows = torch.nonzero(mask.sum(-1) > 0).flatten()
    ctx.metrics.update({"bfs/kept_tactics": float(keep_unit.double().mean()), "bfs/band_low": low,
                        "bfs/band_high": high})
    if rows.numel() == 0:  # under data parallelism the global band may miss all of this rank's tactics
        return batch
    return out.select(rows) if rows.numel() < batch.size else out
