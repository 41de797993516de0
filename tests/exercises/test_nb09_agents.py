"""Notebook 09's exercise checks accept the right answers and say why a wrong one is wrong; the notebook's exercises
start unsolved and its solutions pass."""
import math
import statistics

import pytest

from workbench.exercises import nb09_agents as ex
from workbench.paths import ROOT


def test_exercise_checkers_accept_the_right_answers():
    assert ex.check_trained_tokens(7 + 9 + 6 + 1) == "correct"
    start = [0.95 ** 2, 0.95 ** 4, 0.0, 0.0, 0.0]
    assert ex.check_anchor_step_advantage((start[0] - statistics.mean(start)) / statistics.stdev(start)) \
        == "correct"
    assert ex.check_unshared_step_advantage(-0.5 / statistics.stdev([1, 1, 0, 0])) == "correct"
    assert ex.check_two_step_anchor(1 / math.sqrt(2)) == "correct"


@pytest.mark.parametrize("check,wrong,message", [
    (ex.check_trained_tokens, 33, "observation tokens are mask 0"),
    (ex.check_trained_tokens, 22, "ends with EOS"),
    (ex.check_trained_tokens, 25, "no EOS follows"),
    (ex.check_trained_tokens, None, "count the characters"),
    (ex.check_anchor_step_advantage, 1.3265, "Bessel"),
    (ex.check_anchor_step_advantage, 0.559, "divides by the group's std"),
    (ex.check_anchor_step_advantage, 0.5, "acted from by 5 steps"),
    (ex.check_unshared_step_advantage, 0.0, "episode term A_E is still"),
    (ex.check_unshared_step_advantage, 0.5, "A_S = 0"),
    (ex.check_two_step_anchor, -1 / math.sqrt(2), "wrong sign"),
    (ex.check_two_step_anchor, 0.1, "does not depend on the gap"),
])
def test_exercise_checkers_reject_a_wrong_answer_and_say_why(check, wrong, message):
    with pytest.raises(AssertionError, match=message):
        check(wrong)


def notebook_cells():
    import jupytext

    return [c.source for c in jupytext.read(ROOT / "notebooks" / "09_agents.py").cells if c.cell_type == "code"]


def test_notebook_exercises_start_unsolved_and_its_solutions_pass():
    cells = notebook_cells()
    params = next(c for c in cells if c.lstrip().startswith('preset = "smoke"'))
    for name in ("seed = 0", "solutions = False", "runs_dir = "):
        assert name in params
    learner_cell = next(c for c in cells if "my_two_step = None" in c)  # the placeholders the learner fills in
    answers = learner_cell + "\n" + next(c for c in cells if "if solutions:" in c)  # then the folded solutions
    names = ("my_trained_tokens", "my_start_step", "my_unshared_step", "my_two_step")
    learner = {"solutions": False, "math": math, "statistics": statistics}
    exec(answers, learner)
    assert all(learner[n] is None for n in names)
    solved = {"solutions": True, "math": math, "statistics": statistics}
    exec(answers, solved)
    checks = (ex.check_trained_tokens, ex.check_anchor_step_advantage,
              ex.check_unshared_step_advantage, ex.check_two_step_anchor)
    assert [check(solved[n]) for n, check in zip(names, checks)] == ["correct"] * 4
