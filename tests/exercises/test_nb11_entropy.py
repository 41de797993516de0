"""Notebook 11's exercise checks accept the right answer and explain a wrong one; the answers follow the library."""
import pytest

from tests.exercises.checks import accepts_right_rejects_wrong, explains
from workbench.exercises import nb11_entropy as ex


@pytest.mark.parametrize("check, right, wrong", [
    (ex.check_entropy_at_temperature, 0.5146623, 1.0487051),
    (ex.check_covariance_term, 1.12, -0.14),
    (ex.check_clip_cov_candidates, {0, 4}, {0, 2, 4}),
    (ex.check_alpha_direction, "rise", "fall"),
], ids=lambda x: getattr(x, "__name__", None))
def test_checks_accept_right_and_reject_wrong(check, right, wrong):
    accepts_right_rejects_wrong(check, right, wrong, "x", [1, "a"])


@pytest.mark.parametrize("check, wrong, explanation", [
    (ex.check_entropy_at_temperature, 1.0487051, "T = 1"),           # the logits not divided by T
    (ex.check_entropy_at_temperature, 0.5146623 / 0.6931472, "bits"),
    (ex.check_covariance_term, -0.14, "centre the log-prob"),
    (ex.check_covariance_term, 1.2, "centre the advantage"),
    (ex.check_covariance_term, -0.15, "both factors"),
    (ex.check_clip_cov_candidates, {0, 2, 4}, "strict"),
    (ex.check_clip_cov_candidates, {0, 3, 4}, "already"),
    (ex.check_clip_cov_candidates, [0], "missing"),
    (ex.check_alpha_direction, "falls", "token-mean of the batch's entropies, 0.54"),
    (ex.check_alpha_direction, "down", "strengthen the bonus"),
])
def test_checks_explain_plausible_wrong_answers(check, wrong, explanation):
    explains(check, wrong, explanation)


def test_answers_follow_the_library():
    import torch

    from workbench import ops
    from workbench.objectives.entropy_cov import token_covariance

    logits = torch.tensor([[2.0, 1.0, 0.0, 0.0]])
    assert ex.entropy_at_temperature() == pytest.approx(float(ops.entropy_from_logits(logits, 0.5)), abs=1e-6)
    assert ex.entropy_at_temperature(temperature=1.0) == pytest.approx(float(ops.entropy_from_logits(logits)),
                                                                              abs=1e-6)
    assert ex.covariance_term() == pytest.approx(1.4 * 0.8)
    cov = token_covariance(torch.tensor([ex.CLIP_COV_EXERCISE["logps"]], dtype=torch.float64),
                           torch.tensor([ex.CLIP_COV_EXERCISE["advantages"]], dtype=torch.float64),
                           torch.ones(1, 6, dtype=torch.float64))
    assert cov[0].tolist() == pytest.approx([2.0, 0.5, 1.0, 4.0, 3.0, 0.0])  # the values the notebook states
    assert ex.clip_cov_candidates() == {0, 4}
    assert ex.clip_cov_candidates(lb=0.4) == {0, 1, 2, 4}
    assert ex.alpha_direction(0.8, 0.5) == "fall" and ex.alpha_direction(0.3, 0.5) == "rise"
    assert ex.alpha_direction(0.5, 0.5) == "stay"
    # the exercise: three of five tokens above the target 0.6, their token-mean 0.54 below it
    assert ex.alpha_direction() == "rise"
    assert ex.alpha_direction((0.9, 0.8, 0.7, 0.1, 0.5), 0.6) == "fall"  # mean 0.6 + 0.02
    with pytest.raises(AssertionError, match="weaken the bonus"):
        ex.check_alpha_direction("rises", 0.8, 0.5)
