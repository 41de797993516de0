"""The exercises of notebook 13_credit_assignment (credit assignment against the exact answer): each answer is
checked against the library's own math."""
from __future__ import annotations

from workbench.exercises.answers import as_number, near


def _two_level_exact():
    from workbench.advantages import exact as ce

    mdp, policy = ce.two_level_tree()
    return ce.exact_values(mdp, policy)


def check_credit_first_advantage(answer) -> str:
    """Exercise: the exact advantage A(start, a) on the two-level tree (advantages.exact.two_level_tree)."""
    expected = _two_level_exact().advantage((), 0)
    if not near(as_number(answer), expected):
        raise AssertionError(f"not quite: A(start, a) = Q(start, a) - V(start), and Q(start, a) = V(a); got {answer}")
    return f"correct: A(start, a) = {expected:.3f} (playing a gives up the sure reward after b)"


def check_credit_rloo_second(answer) -> str:
    """Exercise: E[RLOO's advantage | h = (a,), action a] = Q((a,), a) - V(start) on the two-level tree."""
    exact = _two_level_exact()
    expected = exact.Q[(0,)][0] - exact.V[()]
    if not near(as_number(answer), expected):
        raise AssertionError("not quite: RLOO's A_hat is R_i minus the mean of the others, and the others' mean is "
                             f"V(start) on average, whatever episode i did; got {answer}")
    return (f"correct: {expected:.3f}, where the exact advantage is {exact.advantage((0,), 0):.3f}: the broadcast "
            "baseline is V(start), not V(a)")


def check_credit_td_second(answer) -> str:
    """Exercise: the one-step TD error of b after a with the exact critic, r + V(next) - V(a) = A((a,), b)."""
    expected = _two_level_exact().advantage((0,), 1)
    if not near(as_number(answer), expected):
        raise AssertionError(f"not quite: r = 0 (leaf ab), V after the end = 0, V(a) = 0.5; got {answer}")
    return f"correct: {expected:.3f}, exactly the advantage A((a,), b): the exact critic leaves no bias, no variance"
