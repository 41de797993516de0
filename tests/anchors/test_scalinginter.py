"""ScalingInter-RL's horizon against the authors' scheduler (transcribed in formulas_scalinginter.py): our step t runs
at the horizon their fresh run gives its step g = t + 1, for the schedules of their scripts; their resumed runs do
not (REFERENCES-AGENTS.md, section 4), ours do."""
import pytest

from tests.anchors.formulas_scalinginter import StepRoundsScheduler, fit_max_rounds
from workbench.schedules.scalinginter import scalinginter_horizon

pytestmark = pytest.mark.covers("scalinginter-rl")

# (steps_scaling_inter, rounds) of examples/train/ScalingInter-RL/*.sh, then small ones whose stages are short
SCRIPTS = {"babyai": (100, [6, 13, 20]), "sciworld": (100, [10, 20, 30]), "searchqa": (100, [5, 8, 10]),
           "textcraft": (100, [10, 20, 30]), "webarena": (80, [8, 12, 15])}
SMALL = [(1, [1, 2, 3]), (2, [1, 2, 3]), (3, [4]), (1, [2, 2, 5]), (7, [3, 9])]


def ours(every, rounds, steps):
    """{their global step g: our horizon at our step g - 1} for g = 1 .. steps - 1."""
    return {g: scalinginter_horizon(g - 1, steps, rounds=rounds, every=every) for g in range(1, steps)}


@pytest.mark.parametrize("every,rounds", [*SCRIPTS.values(), *SMALL], ids=[*SCRIPTS, *map(str, SMALL)])
def test_our_step_t_gets_the_horizon_of_their_fresh_step_t_plus_1(every, rounds):
    steps = every * (len(rounds) + 2)  # past the last stage: it holds to the end
    assert ours(every, rounds, steps) == fit_max_rounds(every, rounds, steps)


def test_the_stage_changes_after_their_step_k_which_is_before_our_step_k():
    """BabyAI: their steps 1..100 roll out 6 turns, 101..200 13, then 20; ours 0..99, 100..199, 200...."""
    every, rounds = SCRIPTS["babyai"]
    theirs = fit_max_rounds(every, rounds, 400)
    assert [theirs[g] for g in (1, 100, 101, 200, 201, 399)] == [6, 6, 13, 13, 20, 20]
    assert [scalinginter_horizon(t, 400, rounds=rounds, every=every) for t in (0, 99, 100, 199, 200, 398)] == \
        [6, 6, 13, 13, 20, 20]


def test_their_scheduler_object_steps_as_the_fresh_loop_reads_it():
    """The transcription itself: get_rounds() before the step, step() after; set_global_steps(g) returns g // K."""
    scheduler = StepRoundsScheduler(steps_scaling_inter=2, rounds_ls=[1, 2, 3])
    seen = []
    for _ in range(6):
        seen.append(scheduler.get_rounds())
        scheduler.step()
    assert seen == [1, 1, 2, 2, 3, 3]
    resumed = StepRoundsScheduler(steps_scaling_inter=2, rounds_ls=[1, 2, 3])
    resumed.set_global_steps(2)
    assert (resumed.current_stage, resumed.get_rounds(), resumed.global_steps) == (1, 2, 2)


def test_their_resume_is_off_by_one_step_ours_is_the_fresh_run():
    """The documented difference: resumed from global_step_{g0}, their scheduler's counter stays one behind the trainer.
    From a multiple of K the stage advances twice in a row (a whole stage early); from elsewhere each later change
    comes one step late. Ours is a function of the step: the fresh sequence whatever the resume point."""
    every, rounds = SCRIPTS["babyai"]
    fresh = fit_max_rounds(every, rounds, 400)

    def differs(g0):
        resumed = fit_max_rounds(every, rounds, 400, resume_global_step=g0)
        return {g: (fresh[g], n) for g, n in resumed.items() if n != fresh[g]}

    assert differs(100) == {g: (13, 20) for g in range(102, 201)}  # 99 steps at 20 turns, a stage early
    assert differs(125) == {201: (20, 13)}                           # the next change one step late
    assert differs(25) == {101: (13, 6), 201: (20, 13)}              # every later change one step late
    assert differs(200) == {}                                        # already at the last stage
    resumed_ours = {g: scalinginter_horizon(g - 1, 400, rounds=rounds, every=every) for g in range(101, 400)}
    assert resumed_ours == {g: fresh[g] for g in range(101, 400)}
