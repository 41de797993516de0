"""EPO's entropy history: the mean token entropy of each environment-turn index, averaged over past steps.

It drives the `history` list of the regularizer `epo` (into="regularizer:epo.history"). Reference:
WujiangXu/EPO `verl/trainer/ppo/ray_trainer.py` (`self.entropy_history`, `np.mean(..., axis=0)`) and
`agent_system/multi_turn_rollout/rollout_loop.py` (`step_entropy_list`), commit 5b6fa98e.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

from workbench import ops, registry
from workbench.regularizers.epo import EPO_TITLE


@dataclass
class EntropyHistory:
    """Per turn index k: the sum of the step means of H over the steps that had turn k, and their count (a turn
    index no step has reached yet has count 0, and its mean is NaN: unknown to the regularizer)."""

    max_steps: int = 50
    reference_bug: bool = False
    sums: list = field(default_factory=list)
    counts: list = field(default_factory=list)

    def means(self) -> list[float]:
        return [s / c if c else float("nan") for s, c in zip(self.sums, self.counts)]


def step_turn_entropies(entropy: torch.Tensor, mask: torch.Tensor, turn: torch.Tensor | None) -> list[float]:
    """[mean H over the batch's valid tokens of turn k, k = 0..K-1] for one step (the reference's
    `step_entropy_list`: one token mean per environment step over the whole batch)."""
    if turn is None:
        turn = torch.where(mask > 0, 0, -1)
    valid = mask > 0
    n_turns = int(turn[valid].max()) + 1 if valid.any() else 0
    out = []
    for k in range(n_turns):
        of_k = (valid & (turn == k)).to(entropy.dtype)
        out.append(float(ops.masked_mean(entropy, of_k)) if of_k.any() else float("nan"))
    return out


def add_step(state: EntropyHistory, step_means: list[float]) -> EntropyHistory:
    """Fold one step's per-turn means into the history.

    Default: turn k's history averages the steps that reached turn k. reference_bug=True reproduces the trainer:
    the step list is cut to its last max_steps entries and LEFT-padded with zeros to max_steps, then averaged
    position-wise with the past lists, so an episode shorter than max_steps shifts its turn k to position
    max_steps - n + k and earlier positions average in zeros."""
    if state.reference_bug:
        n = state.max_steps
        padded = [0.0] * max(0, n - len(step_means)) + (list(step_means)[-n:] if n else [])
        sums, counts = state.sums or [0.0] * n, state.counts or [0] * n
        return replace(state, sums=[s + x for s, x in zip(sums, padded)], counts=[c + 1 for c in counts])
    grow = max(0, len(step_means) - len(state.sums))
    sums, counts = list(state.sums) + [0.0] * grow, list(state.counts) + [0] * grow
    for k, h in enumerate(step_means):
        if h == h:  # NaN: no valid token of turn k this step
            sums[k] += h
            counts[k] += 1
    return replace(state, sums=sums, counts=counts)


@registry.controller(
    "epo", title=EPO_TITLE,
    summary="Keeps the mean token entropy of every environment-turn index, averaged over past steps, and drives "
            "regularizer:epo.history (the centre of EPO's entropy band).",
    equation=r"\bar H_k = \frac{1}{|S_k|}\sum_{s\in S_k} \mathrm{mean}_{t:\,\mathrm{turn}(t)=k} H^{(s)}_t",
    reads=("entropy", "turn"))
class EPOEntropyHistory:
    """State: an `EntropyHistory`; updated after each step from the batch's sampling-policy entropy [B, T]
    (`batch.entropy`), `turn` and `mask`.

    Our reading: the reference appends the current step's entropies before its update, so its band includes
    the step being trained; the pipeline updates controllers after the step, so here the band is the history of
    the previous steps (none at step 0: no penalty). A non-empty `initial` (the recipe's `history`) counts as one
    past step. reference_bug=True reproduces the trainer's left zero-padding to max_steps (`add_step`).
    """

    @staticmethod
    def init(*, initial, max_steps=50, reference_bug=False):
        if int(max_steps) != max_steps or max_steps < 0:
            raise ValueError(f"max_steps must be a non-negative integer, got {max_steps}")
        state = EntropyHistory(int(max_steps), bool(reference_bug))
        return add_step(state, [float(h) for h in initial]) if initial else state

    @staticmethod
    def update(state, batch, metrics):
        batch.require("entropy")
        return add_step(state, step_turn_entropies(batch.entropy.detach(), batch.mask, batch.turn))

    @staticmethod
    def value(state):
        return state.means()
