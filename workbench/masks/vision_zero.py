"""Vision-Zero's phase mask: train only the action tokens of the current phase's turns.

    m'_{i,t} = m_{i,t} [phase(turn_{i,t}) = p]     p = clue (0) or vote (1)
    m'_{i,t} = m_{i,t}                             p = both (2): every action token, pure self-play GRPO

phase(s) is the phase the environment reports for a row's turn s (`turn_info[i][s]["phase"]`, "clue" or "vote";
`workbench.envs.spy`). The phase p is a parameter the `vision-zero` schedule drives step by step
(`use("vision-zero", into="token_mask:vision-zero.phase")`): the authors' interactive mode trains the decision
(vote) turns on one step and the clue turns on the next, every other phase's samples still played (they give the
trained turns their rewards) but left out of the loss.

Reference: wangqinsi1/Vision-Zero @ fa3c01c162c9d8110c78856684e86270ce6876de,
`src/open-r1-multimodal/src/open_r1/trainer/grpo_trainer.py`: `_handle_clevr_spotdiff_training` (L897-1137: the
samples of the phase not trained are generated without gradient and kept only to compute rewards) and `compute_loss`
(L3713-3722: `training_mask` keeps the rows of the trained phase). Our rows hold one agent's whole game, so the
selection is per turn (a token mask) rather than per sample; where an agent acts in one phase only (the spy game's
players give clues, its judges vote) it is the same selection.
"""
from __future__ import annotations

import torch

from workbench import registry
from workbench.batch import RolloutBatch
from workbench.rewards.vision_zero import VISION_ZERO_TITLE

PHASES = ("clue", "vote")  # the phase named by each value of p: 0 clue, 1 vote (the authors' "decision")
CLUE, VOTE, BOTH = 0, 1, 2

PHASE_MASK_LOGS = {
    "filtered_frac/vision-zero": ("Vision-Zero: share of the rows the phase mask leaves without a trained token this "
                                  "step (their agent acted in the other phase only).",
                                  "Alternates step by step between the two phases' shares of the rows (spy game with "
                                  "judges: the judges' share on clue steps, the players' on vote steps; 0 with phase "
                                  "= both); 1: no row has a turn of the scheduled phase."),
}


def check_phase(*, phase=BOTH, **_) -> None:
    if isinstance(phase, bool) or not isinstance(phase, (int, float)) or phase not in (CLUE, VOTE, BOTH):
        raise ValueError(f"phase={phase!r}: the phase to train is 0 (clue turns), 1 (vote turns) or 2 (both: every "
                         "action token); the `vision-zero` schedule sets it each step")


def turn_phases(batch: RolloutBatch) -> torch.Tensor:
    """[B, S] the phase id (0 clue, 1 vote) of each row's turns; -1 past a row's turns."""
    if len(batch.turn_info) != batch.size:
        raise ValueError(f"vision-zero's phase mask reads turn_info (the phase of each turn); the batch has "
                         f"{len(batch.turn_info)} rows of it for {batch.size} rows: roll out a game with the "
                         "multi-agent rollout `agents`")
    width = max((len(info) for info in batch.turn_info), default=0)
    out = torch.full((batch.size, max(width, 1)), -1, dtype=torch.long)
    for i, info in enumerate(batch.turn_info):
        for s, step in enumerate(info):
            if step.get("phase") not in PHASES:
                raise ValueError(f"row {i}, turn {s}: turn_info has phase {step.get('phase')!r}, not one of "
                                 f"{PHASES}; the phase mask needs a game that names each turn's phase (`spy`)")
            out[i, s] = PHASES.index(step["phase"])
    return out


@registry.token_mask(
    "vision-zero", title=VISION_ZERO_TITLE,
    summary="Phase mask: keep only the action tokens of the turns in the scheduled phase (clue or vote; both = "
            "every action token, pure self-play); the `vision-zero` schedule alternates it step by step.",
    equation=r"m'_{i,t} = m_{i,t}\,[\mathrm{phase}(\mathrm{turn}_{i,t}) = p],\quad p \in \{\mathrm{clue}, "
             r"\mathrm{vote}\};\ p = \mathrm{both}: m' = m",
    reads=("turn", "turn_info"), needs=("agents", "phases"), logs=PHASE_MASK_LOGS, check=check_phase)
def phase_mask(batch: RolloutBatch, *, phase=BOTH) -> torch.Tensor:
    """Reads `mask`, `turn` [B, T] and each turn's phase in `turn_info`; returns the mask [B, T] keeping the tokens
    of phase `phase`'s turns (every token for BOTH)."""
    check_phase(phase=phase)
    if int(phase) == BOTH:
        return batch.mask.clone()
    batch.require("turn")
    phases = turn_phases(batch)  # [B, S]
    of_token = phases.gather(1, batch.turn.clamp(min=0).clamp(max=phases.shape[1] - 1))  # [B, T]
    keep = (of_token == int(phase)) & (batch.turn >= 0)
    return batch.mask * keep.to(batch.mask.dtype)
