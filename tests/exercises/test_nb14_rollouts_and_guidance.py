"""Notebook 14's exercise checks accept the right answer and explain a wrong one; the answers follow the library."""
import math

import pytest
import torch

from tests.exercises.checks import explains
from workbench.exercises import nb14_rollouts_and_guidance as ex


@pytest.mark.parametrize("check, right, wrong", [
    (ex.check_ghpo_hint_lengths, [0, 1, 2], [1, 1, 2]),
    (ex.check_ghpo_hint_lengths, (0, 1, 2), [0, 1]),
    (ex.check_arpo_branch_probability, 0.6, 0.55),
    (ex.check_off_policy_weights, [0.4472, 0.2222], [0.2222, 0.4472]),
], ids=lambda x: getattr(x, "__name__", None))
def test_checks_accept_right_and_reject_wrong(check, right, wrong):
    assert check(right).startswith("correct")
    for bad in (wrong, "x", [1, "a"]):
        with pytest.raises(AssertionError, match="not quite"):
            check(bad)


@pytest.mark.parametrize("check, wrong, explanation", [
    (ex.check_ghpo_hint_lengths, [1, 1, 2], "banker's rounding"),
    (ex.check_ghpo_hint_lengths, [0.5, 1, 1.5], "whole characters"),
    (ex.check_ghpo_hint_lengths, [0, 1], "3 whole numbers"),
    (ex.check_ghpo_hint_lengths, [0, 1, 1], "first round(omega x 2)"),
    (ex.check_arpo_branch_probability, 0.75, "w = 0.2"),
    (ex.check_arpo_branch_probability, 0.4, "the entropy rose"),
    (ex.check_arpo_branch_probability, 0.1, "tau is the base"),
    (ex.check_arpo_branch_probability, "0.6", "one number"),
    (ex.check_off_policy_weights, [0.5, 0.2222], "exploration weight"),
    (ex.check_off_policy_weights, [0.4472, 2 / 3], "its derivative"),
    (ex.check_off_policy_weights, [1.0, 0.2222], "not pi / pi_old"),
    (ex.check_off_policy_weights, 0.4472, "two numbers"),
])
def test_checks_explain_plausible_wrong_answers(check, wrong, explanation):
    explains(check, wrong, explanation)


def test_answers_follow_the_library():
    from workbench.objectives.policy_shaping import policy_shaping
    from workbench.objectives.rl_plus import rl_plus
    from workbench.rollout.arpo import branches

    assert ex.ghpo_hint_lengths() == [0, 1, 2] and ex.ghpo_hint_lengths("12345") == [1, 2, 4]
    assert ex.arpo_branch_probability() == pytest.approx(0.6)
    assert ex.arpo_branch_probability(h=-10.0) == 0.0 and ex.arpo_branch_probability(tau=1.0, h=0.0) == 1.0
    us = [(i + 0.5) / 10_000 for i in range(10_000)]  # the reference's test on u ~ U(0, 1) branches with P
    assert sum(branches(u, 0.5, 0.5, 0.2) for u in us) / len(us) == pytest.approx(0.6, abs=1e-3)
    # the weights are each loss's gradient on one external token at A = 1, pi_theta = pi_old = 0.2
    for fn, expected in zip((rl_plus, policy_shaping), ex.off_policy_weights()):
        logp = torch.tensor([[math.log(0.2)]], dtype=torch.float64, requires_grad=True)
        one = torch.ones(1, 1, dtype=torch.float64)
        loss, _ = fn(logp, logp.detach(), one, one, offpolicy_mask=one, agg="token-mean")
        (grad,) = torch.autograd.grad(-loss, logp)
        assert float(grad) == pytest.approx(expected)
    assert ex.off_policy_weights(p=0.999999)[0] == pytest.approx(0.0, abs=2e-3)
