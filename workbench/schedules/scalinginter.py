"""ScalingInter-RL's interaction-horizon curriculum: the most actions an episode may take at training step t,

    h(t) = rounds[min(floor(t / K), n - 1)],   t = 0, 1, ... (our steps),  K = `every`,  n = len(rounds),

non-decreasing and piecewise constant: K steps at rounds[0], K at rounds[1], ..., then rounds[-1] to the end. It
drives the multi-turn rollout's cap (`use("scalinginter-rl", into="rollout:turns.max_turns")`): an episode stops after
h(t) actions unless its environment ends it first. The method's recipe is `scalinginter-rl`
(`workbench.recipes.rollout_control`).

Source: WooooDyy/AgentGym-RL @ 82402a99c62a293735a3f412fb8ac9a600673bc0
    AgentGym-RL/verl/agent_trainer/ppo/ray_trainer.py  `StepRoundsScheduler` (L222-245: `__init__`,
        `set_global_steps`, `step`, `get_rounds`), driven by `RayPPOTrainer.fit` (L749-876: `global_steps` starts at
        1, `max_rounds = rounds_scheduler.get_rounds()` before the step's rollout, `rounds_scheduler.step()` after it)
        and `_load_checkpoint` (L695-696: `set_global_steps(global_steps)` on resume);
    AgentGym-RL/verl/workers/rollout/agent_vllm_rollout/vllm_rollout.py  `while rounds < max_rounds`: a round is one
        generated action and its environment step (our turn);
    examples/train/ScalingInter-RL/babyai_train.sh  L41-43: `steps_scaling_inter=100`, `rounds=[6,13,20]` (our
        defaults: BabyAI is the closest of its environments to our grid worlds; sciworld and textcraft use
        [10,20,30], searchqa [5,8,10], webarena K = 80 with [8,12,15]).

Where the stage changes. Their fresh run numbers steps g = 1, 2, ...; the scheduler's own counter starts at 1 too and
`step()` tests it (`global_steps % steps_scaling_inter == 0`) before incrementing it, so the stage advances after step
g = K, 2K, ...: step g runs at rounds[min((g - 1) // K, n - 1)]. Our steps are 0-based, t = g - 1, so h(t) above is
their fresh run step for step: our step K (their K + 1) is the first at rounds[1], our step 2K the first at rounds[2].

Deviation (a reference bug, not reproduced). On resume from checkpoint `global_step_{g0}` the trainer runs step
g0 + 1 but `set_global_steps(g0)` leaves the scheduler's counter at g0, one behind the trainer, for the rest of the
run: every later stage change comes one step late (after step mK + 1), and when g0 is itself a multiple of K (the
scripts save every 25 steps, K = 100) the stage `set_global_steps` already advanced advances again after step
g0 + 1 (a resume from global_step_100 rolls out 20 turns from step 102 instead of 201). Here h is a pure function of
the step: a resumed run uses the horizons an uninterrupted run uses (tests/anchors/test_scalinginter.py).
"""
from __future__ import annotations

from workbench import registry

TITLE = ("AgentGym-RL: Training LLM Agents for Long-Horizon Decision Making through Multi-Turn Reinforcement "
         "Learning")
BABYAI_ROUNDS = (6, 13, 20)    # examples/train/ScalingInter-RL/babyai_train.sh: algorithm.rounds_ctrl.rounds
STEPS_SCALING_INTER = 100      # the same script: algorithm.rounds_ctrl.steps_scaling_inter


def check_horizons(*, rounds=BABYAI_ROUNDS, every=STEPS_SCALING_INTER, **_) -> None:
    """Refuse a curriculum the rollout cannot follow: no stage, a turn count that is not a whole number >= 1, a stage
    shorter than the one before it (the horizon only grows), or stages shorter than one step."""
    if isinstance(rounds, (str, bytes)) or not hasattr(rounds, "__len__") or len(rounds) == 0:
        raise ValueError(f"rounds must be a non-empty list of turn counts, one per stage (e.g. [6, 13, 20]), got "
                         f"{rounds!r}; for a fixed horizon give one: rounds=[N]")
    for i, turns in enumerate(rounds):
        if isinstance(turns, bool) or not isinstance(turns, int) or turns < 1:
            raise ValueError(f"rounds[{i}]={turns!r}: each stage's horizon is a whole number of turns >= 1 (the most "
                             f"actions an episode takes); got rounds={list(rounds)}")
    for i in range(1, len(rounds)):
        if rounds[i] < rounds[i - 1]:
            raise ValueError(f"rounds must not decrease (the curriculum only lengthens the horizon): rounds[{i}]="
                             f"{rounds[i]} < rounds[{i - 1}]={rounds[i - 1]} in {list(rounds)}; sort them")
    if isinstance(every, bool) or not isinstance(every, int) or every < 1:
        raise ValueError(f"every={every!r}: the steps per stage (the reference's steps_scaling_inter) must be a whole "
                         "number >= 1")


def stage(step: int, every: int, stages: int) -> int:
    """min(floor(step / every), stages - 1): the stage step `step` (0-based) trains in."""
    return min(step // every, stages - 1)


@registry.schedule(
    "scalinginter-rl", title=TITLE,
    summary="Staged interaction horizon: K steps at rounds[0] turns, K at rounds[1], ..., then the last to the end "
            "(BabyAI's [6, 13, 20], K = 100); drives the multi-turn rollout's turn cap (rollout:turns.max_turns).",
    equation=r"h(t) = \mathrm{rounds}\big[\min(\lfloor t / K \rfloor,\ n - 1)\big]",
    needs=("multi_turn",), check=check_horizons)
def scalinginter_horizon(step: int, total: int, *, rounds=BABYAI_ROUNDS, every: int = STEPS_SCALING_INTER) -> int:
    """h(step) = rounds[min(step // every, len(rounds) - 1)], an int (the rollout counts turns; a whole number also
    drives a parameter typed int). `total` is not read: the stages are counted in steps, not in shares of the run, so
    a longer run stays at the last horizon (the reference's behaviour)."""
    check_horizons(rounds=rounds, every=every)
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    return int(rounds[stage(step, every, len(rounds))])
