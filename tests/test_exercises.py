"""The notebooks' exercise checks accept the right answer and reject a wrong one, and the answers follow the
library."""
from __future__ import annotations

import pytest

from workbench import exercises
from workbench.paths import ROOT


def test_aggregation_exercises():
    assert exercises.check_token_weight(1 / 20) == "correct"
    assert exercises.check_token_weight(0.05) == "correct"
    assert exercises.check_token_weight(1 / 1010, mode="token-mean") == "correct"
    with pytest.raises(AssertionError):
        exercises.check_token_weight(1 / 1010)
    assert exercises.check_length_bias("short") == "correct"
    assert exercises.check_length_bias("same", mode="token-mean") == "correct"
    with pytest.raises(AssertionError):
        exercises.check_length_bias("long")


def test_kl_exercises():
    assert exercises.check_k1_sign("negative") == "correct"
    assert exercises.check_k1_sign("positive", p=0.5, p_ref=0.2) == "correct"
    with pytest.raises(AssertionError):
        exercises.check_k1_sign("positive")
    assert exercises.check_nonnegative_estimators(["k3", "abs", "k2"]) == "correct"
    for wrong in (["k3"], ["k1", "k2", "k3", "abs"]):
        with pytest.raises(AssertionError):
            exercises.check_nonnegative_estimators(wrong)
    assert exercises.check_reverse_kl_gradient("k2") == "correct"
    assert exercises.check_reverse_kl_gradient(["k2"]) == "correct"
    for wrong in ("k3", ["k1", "k2"]):
        with pytest.raises(AssertionError):
            exercises.check_reverse_kl_gradient(wrong)


EXERCISES = [
    (exercises.check_grpo_sum_of_squares, (7.0, 7.0), (8.0, 8.0)),
    (exercises.check_local_microbatch_weight, 1 / 20, 1 / 1010),
    (exercises.check_negative_advantage_weights, (-5.0, 0.0), (0.0, 0.0)),
    (exercises.check_opo_by_hand, [0.875, -0.125, -0.125, -0.125], [0.75, -0.25, -0.25, -0.25]),
    (exercises.check_on_policy_clip_fraction, 0.0, 0.05),
    (exercises.check_nonzero_weight_objectives, {"cispo", "sapo"}, {"cispo", "sapo", "ppo-clip"}),
    (exercises.check_rloo_by_hand, [1.0, -1 / 3, -1 / 3, -1 / 3], [0.75, -0.25, -0.25, -0.25]),
    (exercises.check_largest_advantage_rate, 1 / 8, 0.5),
    (exercises.check_k3_old, 1 / 6, 0.0),
    (exercises.check_no_signal_metric, "frac_zero_std_groups", "reward/std"),
]


@pytest.mark.parametrize("check, right, wrong", EXERCISES, ids=[e[0].__name__ for e in EXERCISES])
def test_exercise_checks_accept_right_and_reject_wrong(check, right, wrong):
    assert check(right) == "correct"
    with pytest.raises(AssertionError, match="not quite"):
        check(wrong)


def test_exercise_answers_follow_the_library():
    assert exercises.nonzero_weight_objectives() == {"cispo", "sapo"}
    assert exercises.k3_old((0.5, 1.0, 2.0)) == pytest.approx(1 / 6)
    assert exercises.largest_advantage_success_rate(4) == pytest.approx(1 / 4)
    with pytest.raises(AssertionError, match="not quite"):
        exercises.check_no_signal_metric("no/such/metric")


def test_exercise_checks_accept_right_and_reject_wrong_answers():
    assert exercises.check_dpo_weight_at_zero(0.05) == "correct"
    assert exercises.check_dpo_weight_at_zero(0.25, beta=0.5) == "correct"
    for wrong in (0.1, 0.5, 0.025):
        with pytest.raises(AssertionError, match="not quite"):
            exercises.check_dpo_weight_at_zero(wrong)
    assert exercises.check_reference_free(["simpo"]) == "correct" and exercises.check_reference_free("simpo")
    for wrong in (["dpo"], ["simpo", "hinge"], []):
        with pytest.raises(AssertionError, match="not quite"):
            exercises.check_reference_free(wrong)
    assert exercises.check_pure_rock_exploitability(0.45) == "correct"
    assert exercises.check_pure_rock_exploitability(0.5, strength=1.0) == "correct"
    for wrong in (0.95, 0.0, 0.5):
        with pytest.raises(AssertionError, match="not quite"):
            exercises.check_pure_rock_exploitability(wrong)


@pytest.mark.parametrize("check, wrong, explanation", [
    # 01: the std division makes every group's total push G - 1, whatever its success rate
    (exercises.check_grpo_sum_of_squares, (8.0, 8.0), "population std"),
    (exercises.check_grpo_sum_of_squares, (0.875, 2.0), "without the std division"),
    (exercises.check_grpo_sum_of_squares, 7.0, "one number per group"),
    # 02: local denominators only know the micro-batch's own tokens, and the loop divides by k
    (exercises.check_local_microbatch_weight, 1 / 1010, "full-batch"),
    (exercises.check_local_microbatch_weight, 1 / 10, "divides each micro-batch's loss by k"),
    # 04: PPO-clip does not bound r on the A < 0 side; dual-clip's cap does
    (exercises.check_negative_advantage_weights, (0.0, 0.0), "unclipped branch"),
    (exercises.check_negative_advantage_weights, (5.0, 0.0), "sign"),
    (exercises.check_negative_advantage_weights, (-5.0, -5.0), "cap"),
    # 05: OPO's baseline is length-weighted
    (exercises.check_opo_by_hand, [0.75, -0.25, -0.25, -0.25], "plain mean"),
    (exercises.check_opo_by_hand, [1.0, -1 / 3, -1 / 3, -1 / 3], "length"),
])
def test_new_checks_explain_plausible_wrong_answers(check, wrong, explanation):
    with pytest.raises(AssertionError, match="not quite") as caught:
        check(wrong)
    assert explanation in str(caught.value)


def test_new_exercise_answers_follow_the_library():
    assert exercises.grpo_sum_of_squares() == pytest.approx((7.0, 7.0))  # G - 1 for any group with signal
    assert exercises.grpo_sum_of_squares([(1, 0, 0), (5, 2, 2)]) == pytest.approx((2.0, 2.0))
    # one answer per micro-batch: local token-mean is seq-mean-token-mean
    assert exercises.local_microbatch_weight() == pytest.approx(exercises.token_weight((10, 1000)))
    assert exercises.negative_advantage_weights() == pytest.approx((-5.0, 0.0))
    assert exercises.negative_advantage_weights(ratio=2.0) == pytest.approx((-2.0, -2.0))  # below c = 3: no cap
    assert exercises.opo_advantages() == pytest.approx([0.875, -0.125, -0.125, -0.125])
    assert exercises.opo_advantages(lengths=(4, 4, 4, 4)) == pytest.approx([0.75, -0.25, -0.25, -0.25])
    assert exercises.check_opo_by_hand([0.75, -0.25, -0.25, -0.25], lengths=(4, 4, 4, 4)) == "correct"
    for empty in (None, "7, 7"):  # no answer yet, or not numbers: rejected, never an error of another type
        with pytest.raises(AssertionError, match="not quite"):
            exercises.check_grpo_sum_of_squares(empty)


FAMILY_NOTEBOOKS = ("01_grpo", "02_loss_aggregation", "03_kl_estimators", "04_clipping_zoo",
                    "05_advantage_estimators", "08_preference")  # at least three exercises each


def exercise_cells(stem: str) -> tuple[str, str]:
    """(parameters cell, answers + folded solutions + check cell) of a notebook, as its source code."""
    import jupytext

    cells = [c for c in jupytext.read(ROOT / "notebooks" / f"{stem}.py").cells if c.cell_type == "code"]
    tagged = {tag: i for i, c in enumerate(cells) for tag in c.metadata.get("tags", [])}
    solved = tagged["hide-input"]  # the answers cell comes just before it, the check cell just after
    return cells[tagged["parameters"]].source, "\n".join(c.source for c in cells[solved - 1:solved + 2])


@pytest.mark.parametrize("stem", FAMILY_NOTEBOOKS + ("06_metric_glossary", "07_compare"))
def test_notebook_exercises_start_unsolved_and_their_solutions_pass(stem, capsys):
    from workbench.recipes import get_recipe

    params, exercise = exercise_cells(stem)
    assert "solutions = False" in params
    for solutions, verdict in ((False, "no answer yet"), (True, "correct")):
        namespace = {"get_recipe": get_recipe}  # the one notebook import a solution uses (07)
        exec(params, namespace)
        exec(exercise, {**namespace, "solutions": solutions})
        lines = capsys.readouterr().out.splitlines()
        assert len(lines) >= (3 if stem in FAMILY_NOTEBOOKS else 1), lines
        assert [line.split(":")[0] for line in lines] == [f"exercise {n}" for n in range(1, len(lines) + 1)]
        assert all(line.split(": ", 1)[1].startswith(verdict) for line in lines), lines
