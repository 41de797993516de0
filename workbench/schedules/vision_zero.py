"""Vision-Zero's phase schedule: decision (vote) and clue training alternate every L steps.

    p(t) = 1 (vote)   if t mod 2L < L                 training_phase = "interactive", L = cycle_length (1)
    p(t) = 0 (clue)   otherwise
    p(t) = 0, 1 or 2  for training_phase = "clue", "decision" or "both" (one phase every step)

It drives the phase mask (`use("vision-zero", into="token_mask:vision-zero.phase")`, `workbench.masks.vision_zero`):
p = 2 keeps every action token, so a one-phase "both" schedule is pure self-play GRPO on the whole game. The switch
is deterministic, a function of the step only; the card's reading ("switch phase when either role's win rate
exceeds 0.8 or after K steps") is not what the code does (REFERENCES-AGENTS.md section 4: a fixed schedule).

Reference: wangqinsi1/Vision-Zero @ fa3c01c162c9d8110c78856684e86270ce6876de,
`src/open-r1-multimodal/src/open_r1/trainer/grpo_trainer.py::_handle_clevr_spotdiff_training` (L909-923:
`cycle_position = global_step % (2 * interactive_cycle_length)`, decision when below the cycle length, else clue);
`run_scripts/run_grpo_vision_zero.sh` (`TRAINING_PHASE=interactive`, `INTERACTIVE_CYCLE_LENGTH=1`). t is our 0-based
step, as the trainer's `global_step` (0 at the first step): step 0 trains the decision.

`clue_steps_train_votes` (default False): in the shipped code the clue steps train the decision samples too.
`compute_loss` (L3713-3722) picks the rows to train by `script_args.training_phase`, which is "interactive" there,
not the step's phase, so it falls to the "both" branch; the decision samples (played on clue steps to give the clues
their rewards) are therefore trained on every step, the clue samples on every other one. True reproduces that
(p = 2 on clue steps); the default is the alternation the code's phase switch and its logs describe.
"""
from __future__ import annotations

from workbench import registry
from workbench.masks.vision_zero import BOTH, CLUE, VOTE
from workbench.rewards.vision_zero import VISION_ZERO_TITLE

TRAINING_PHASES = ("interactive", "clue", "decision", "both")  # the authors' `training_phase` values
ONE_PHASE = {"clue": CLUE, "decision": VOTE, "both": BOTH}


def check_phase_schedule(*, cycle_length=1, training_phase="interactive", clue_steps_train_votes=False, **_) -> None:
    if isinstance(cycle_length, bool) or not isinstance(cycle_length, int) or cycle_length < 1:
        raise ValueError(f"cycle_length={cycle_length!r}: the steps each phase lasts must be an integer >= 1 (the "
                         "authors' INTERACTIVE_CYCLE_LENGTH=1)")
    if training_phase not in TRAINING_PHASES:
        raise ValueError(f"training_phase={training_phase!r} is not one of {TRAINING_PHASES} (the authors' "
                         "TRAINING_PHASE; 'interactive' alternates, the others train one phase every step)")
    if not isinstance(clue_steps_train_votes, bool):
        raise ValueError(f"clue_steps_train_votes={clue_steps_train_votes!r} must be True or False")


def interactive_phase(step: int, cycle_length: int = 1) -> int:
    """1 (vote) in the first half of each cycle of 2 cycle_length steps, 0 (clue) in the second."""
    return VOTE if step % (2 * cycle_length) < cycle_length else CLUE


@registry.schedule(
    "vision-zero", title=VISION_ZERO_TITLE,
    summary="Iterative self-play phase switch: the decision (vote) turns train for cycle_length steps (1), then the "
            "clue turns, and so on (a fixed schedule, decision first); drives the phase mask. A one-phase schedule "
            "('both') trains every turn: pure self-play GRPO.",
    equation=r"p(t) = \begin{cases} \mathrm{vote} & t \bmod 2L < L \\ \mathrm{clue} & \text{otherwise}\end{cases}",
    choices={"training_phase": TRAINING_PHASES}, check=check_phase_schedule)
def vision_zero_phase(step: int, total: int, *, cycle_length=1, training_phase="interactive",
                      clue_steps_train_votes=False) -> float:
    """The phase to train at `step` as the mask's parameter: 0 clue, 1 vote, 2 both (`total` is not used: the
    switch depends on the step only)."""
    check_phase_schedule(cycle_length=cycle_length, training_phase=training_phase,
                         clue_steps_train_votes=clue_steps_train_votes)
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    if training_phase != "interactive":
        return float(ONE_PHASE[training_phase])
    phase = interactive_phase(step, cycle_length)
    return float(BOTH if phase == CLUE and clue_steps_train_votes else phase)
