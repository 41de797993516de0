"""ScalingInter-RL's staged interaction horizon h(t) = rounds[min(t // K, n - 1)]: the schedule's math, the cap it
puts on every episode of a real training run, a one-stage schedule as a fixed horizon, its refusals, and the recipe
training and resuming exactly (the reference's resumed runs do not: tests/anchors/test_scalinginter.py)."""
from itertools import pairwise

import pytest

from tests.helpers import TINY, DigitSteps, metric_rows, resumes_exactly, run_task, task_for
from workbench import registry
from workbench.recipes import get_recipe, with_overrides
from workbench.schedules.scalinginter import check_horizons, scalinginter_horizon
from workbench.train import Trainer, make_config
from workbench.train.pipeline import Pipeline

pytestmark = pytest.mark.covers("scalinginter-rl")

CURRICULUM = {"rounds": [1, 2, 3], "every": 1}  # a stage per step: h = 1, 2, 3, 3, ... over TINY's 4 steps


def config(schedule=None, **overrides):
    """A TINY run of the recipe (task named keydoor so the start-up check passes; the tests train on DigitSteps)."""
    kw, _ = task_for("scalinginter-rl", **TINY)
    recipe_overrides = {"schedules": schedule} if schedule is not None else {}
    return make_config("smoke", **{**kw, "recipe": "scalinginter-rl", "recipe_overrides": recipe_overrides,
                                   **overrides})


def horizons(steps, **kw):
    return [scalinginter_horizon(t, steps, **kw) for t in range(steps)]


# ------------------------------------------------------------------------------------------------ (1) the schedule

def test_the_horizon_is_non_decreasing_piecewise_constant_and_changes_at_steps_k_and_2k():
    """The recipe's defaults (BabyAI's [6, 13, 20], K = 100): our steps 0..99 at 6, 100..199 at 13, 200.. at 20 (their
    steps 1..100, 101..200, 201..); a step past the run's length keeps the last stage."""
    use = get_recipe("scalinginter-rl").schedules[0]
    assert use.into == "rollout:turns.max_turns" and use.kw == {"rounds": (6, 13, 20), "every": 100}
    h = horizons(450, **use.kw)
    assert all(a <= b for a, b in pairwise(h))
    assert [t for t in range(1, 450) if h[t] != h[t - 1]] == [100, 200]
    assert h[:100] == [6] * 100 and h[100:200] == [13] * 100 and h[200:] == [20] * 250
    assert scalinginter_horizon(10_000, 450, **use.kw) == 20 and type(h[0]) is int
    assert horizons(7, rounds=(2, 2, 5), every=3) == [2, 2, 2, 2, 2, 2, 5]  # a repeated stage is allowed


def test_the_pipeline_drives_the_rollouts_turn_cap_with_it():
    pipeline = Pipeline(get_recipe("scalinginter-rl"))
    rollout = pipeline.parts["rollout"][0]
    driven = [pipeline.kwargs(rollout, t, 300)["max_turns"] for t in (0, 99, 100, 199, 200, 299)]
    assert driven == [6, 6, 13, 13, 20, 20]
    assert registry.get("schedule", "scalinginter-rl").needs == ("multi_turn",)


# ------------------------------------------------------------------------------- (2) no episode exceeds h(step)

@pytest.mark.parametrize("task", ["digit_steps", "gridworld"])
def test_in_a_training_run_no_episode_takes_more_than_h_step_turns(task, tmp_path):
    """Every step's batch of a real run (rollout, update, checkpoints): each row's turns (its last step id + 1, and the
    per-step reward columns) are at most h(step). DigitSteps' episodes last 3 turns, so there the cap is reached
    exactly; gridworld's end on their own too, never later than the cap."""
    trainer = Trainer(config(CURRICULUM, task="gridworld"), tmp_path, progress=False)
    if task == "digit_steps":
        trainer.task = DigitSteps()
    turns, make_batch = {}, trainer.make_batch

    def recorded(step):
        batch = make_batch(step)
        turns[step] = ((batch.turn.max(-1).values + 1).tolist(), batch.turn_rewards.shape[1])
        return batch

    trainer.make_batch = recorded
    trainer.run()
    h = horizons(TINY["steps"], **CURRICULUM)
    assert sorted(turns) == list(range(TINY["steps"])) and h == [1, 2, 3, 3]
    for step, (per_row, columns) in turns.items():
        assert max(per_row) <= h[step] and columns <= h[step], (step, per_row)
        if task == "digit_steps":
            assert per_row == [h[step]] * len(per_row) and columns == h[step]


# --------------------------------------------------------------------------- (3) one stage is a fixed horizon

def test_a_one_stage_schedule_is_the_fixed_horizon(tmp_path):
    """rounds=[2] is h = 2 at every step, and a run with it logs row for row what the same recipe with no schedule and
    the rollout's max_turns=2 logs; the cap binds (the env's own 3 turns log otherwise)."""
    assert horizons(300, rounds=[2], every=1) == [2] * 300 and horizons(300, rounds=[2]) == [2] * 300
    runs = {"scheduled": {"schedules": {"rounds": [2]}},
            "fixed": {"schedules": [], "rollout": {"max_turns": 2}},
            "uncapped": {"schedules": []}}
    for name, overrides in runs.items():
        run_task(config(recipe_overrides=overrides), tmp_path / name, DigitSteps())
    scheduled = rollout_rows(tmp_path / "scheduled")
    assert len(scheduled) == TINY["steps"] and scheduled == rollout_rows(tmp_path / "fixed")
    assert scheduled != rollout_rows(tmp_path / "uncapped")


def rollout_rows(out):
    """The run's metric rows less the driven value itself (`Pipeline.driven_metrics`, should it log schedules as it
    logs controllers): a run with the schedule and one without it differ by that column, not by what they trained."""
    return [{k: v for k, v in row.items() if k != "rollout:turns.max_turns"} for row in metric_rows(out)]


# ------------------------------------------------------------------------------------------- refusals, training

@pytest.mark.parametrize("schedule,match", [
    ({"rounds": []}, r"rounds must be a non-empty list of turn counts"),
    ({"rounds": [3, 0]}, r"rounds\[1\]=0: each stage's horizon is a whole number of turns >= 1"),
    ({"rounds": [2, 2.5]}, r"rounds\[1\]=2.5: each stage's horizon is a whole number of turns >= 1"),
    ({"rounds": [6, 13, 10]}, r"rounds must not decrease .* rounds\[2\]=10 < rounds\[1\]=13 .* sort them"),
    ({"every": 0}, r"every=0: the steps per stage \(the reference's steps_scaling_inter\) must be a whole number"),
    ({"every": 1.5}, r"every=1.5 needs a whole number"),
])
def test_bad_settings_are_refused_before_anything_is_written(schedule, match, tmp_path):
    with pytest.raises(ValueError, match=r"schedule 'scalinginter-rl': " + match):
        Trainer(config(schedule), tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


def test_the_check_names_the_parameter_when_called_directly():
    with pytest.raises(ValueError, match=r"^every=True"):
        check_horizons(every=True)
    with pytest.raises(ValueError, match=r"^rounds\[0\]=True"):
        check_horizons(rounds=[True])
    with pytest.raises(ValueError, match=r"step must be >= 0"):
        scalinginter_horizon(-1, 10)
    check_horizons(rounds=[1], every=1)


def test_a_one_turn_task_is_refused_naming_the_multi_turn_ones(tmp_path):
    with pytest.raises(ValueError, match=r"schedule:scalinginter-rl needs episodes of several turns .* task "
                                         r"'addition' has none\. Train it on a task that does: --task .*gridworld"):
        Trainer(config(task="addition"), tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


def test_the_recipe_trains_and_resumes_exactly_across_a_stage_change(tmp_path):
    """every=2: h = 1, 1, 2, 2; killed after step 2 and resumed from the checkpoint after step 1, the first resumed
    step is the first of stage 2, the case where the reference's resumed scheduler runs a stage early."""
    curriculum = {"rounds": [1, 2, 3], "every": 2}
    assert horizons(TINY["steps"], **curriculum) == [1, 1, 2, 2]
    assert resumes_exactly(config(curriculum), tmp_path, task=DigitSteps())
    rows = metric_rows(tmp_path / "straight")
    assert any(r["grad_norm"] > 0 for r in rows)
    assert with_overrides(get_recipe("scalinginter-rl"), {"schedules": curriculum}).schedules[0].kw == curriculum
