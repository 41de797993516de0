"""Notebook 04's exercise checks accept the right answer and explain a wrong one; the answers follow the library."""
import pytest

from tests.exercises.checks import accepts_right_rejects_wrong, explains
from workbench.exercises import nb04_clipping_zoo as ex


@pytest.mark.parametrize("check, right, wrong", [
    (ex.check_negative_advantage_weights, (-5.0, 0.0), (0.0, 0.0)),
    (ex.check_logged_clip_fraction, 0.04, 0.06),
    (ex.check_nonzero_weight_objectives, {"cispo", "sapo"}, {"cispo", "sapo", "ppo-clip"}),
], ids=lambda x: getattr(x, "__name__", None))
def test_checks_accept_right_and_reject_wrong(check, right, wrong):
    accepts_right_rejects_wrong(check, right, wrong)


@pytest.mark.parametrize("check, wrong, explanation", [
    # the first optimizer step of a batch clips nothing, and the trainer logs the mean over all mu steps
    (ex.check_logged_clip_fraction, 0.06, "first optimizer step"),
    (ex.check_logged_clip_fraction, 0.12, "not their sum"),
    (ex.check_logged_clip_fraction, 0.0, "later ones"),
    # PPO-clip does not bound r on the A < 0 side; dual-clip's cap does
    (ex.check_negative_advantage_weights, (0.0, 0.0), "unclipped branch"),
    (ex.check_negative_advantage_weights, (5.0, 0.0), "sign"),
    (ex.check_negative_advantage_weights, (-5.0, -5.0), "cap"),
])
def test_checks_explain_plausible_wrong_answers(check, wrong, explanation):
    explains(check, wrong, explanation)


def test_answers_follow_the_library():
    assert ex.nonzero_weight_objectives() == {"cispo", "sapo"}
    assert ex.logged_clip_fraction() == pytest.approx(0.04)
    assert ex.logged_clip_fraction(()) == 0.0  # mu = 1: r = 1 on the only step, nothing clips
    assert ex.negative_advantage_weights() == pytest.approx((-5.0, 0.0))
    assert ex.negative_advantage_weights(ratio=2.0) == pytest.approx((-2.0, -2.0))  # below c = 3: no cap
