"""The exercises of notebook 14_rollouts_and_guidance (rollouts and guidance): each answer is checked against the
library's own functions (GHPO's hint, ARPO's branch probability, RL-PLUS's and LUFFY's off-policy token weights)."""
from __future__ import annotations

import math

import torch

from workbench.exercises.answers import all_near, as_number, as_numbers, near

HINT_EXERCISE = {"solution": "15"}                            # a two-character answer, e.g. of "7+8="
BRANCH_EXERCISE = {"h_init": 0.15, "h": 0.65, "tau": 0.5, "w": 0.2}  # arpo-agentic's recipe: tau 0.5, w 0.2
WEIGHT_EXERCISE = {"p": 0.2, "rl_plus_gamma": 0.5, "shaping_gamma": 0.1}  # pi_theta = pi_old = p on the token


def ghpo_hint_lengths(solution: str = HINT_EXERCISE["solution"]) -> list[int]:
    """Characters of `solution` in GHPO's hint at each of its stages (`tasks.guidance.solution_hint`)."""
    from workbench.tasks.guidance import solution_hint
    from workbench.transforms.ghpo import GHPO_FRACTIONS

    return [len(solution_hint([solution], f)) for f in GHPO_FRACTIONS]


def check_ghpo_hint_lengths(answer, solution: str = HINT_EXERCISE["solution"]) -> str:
    """Exercise: the hint lengths at omega = 0.25, 0.5, 0.75 for a two-character solution."""
    from workbench.transforms.ghpo import GHPO_FRACTIONS

    expected = ghpo_hint_lengths(solution)
    if all_near(answer, expected):
        return (f"correct: {expected}: round(omega x {len(solution)}) with Python's round, which takes a half to the "
                "even neighbour, so the first stage gives no hint at all")
    given = as_numbers(answer)
    if given is None or len(given) != len(GHPO_FRACTIONS):
        stages = ", ".join(map(str, GHPO_FRACTIONS))
        hint = f"answer {len(GHPO_FRACTIONS)} whole numbers, one per stage (omega = {stages})"
    elif all_near(given, [f * len(solution) for f in GHPO_FRACTIONS]):
        hint = "a hint is whole characters: round(omega |y*|), not omega |y*|"
    elif all_near(given, [math.floor(f * len(solution) + 0.5) for f in GHPO_FRACTIONS]):
        hint = "Python's round(0.5) is 0, not 1: a half goes to the even neighbour (banker's rounding)"
    else:
        hint = f"the hint is the first round(omega x {len(solution)}) characters of the solution"
    raise AssertionError(f"not quite ({answer}): {hint}")


def arpo_branch_probability(h_init: float = BRANCH_EXERCISE["h_init"], h: float = BRANCH_EXERCISE["h"],
                            tau: float = BRANCH_EXERCISE["tau"], w: float = BRANCH_EXERCISE["w"]) -> float:
    """P(branch) after a tool response whose action measured H, on a trajectory whose first action measured H_init
    (`rollout.arpo.branch_probability`)."""
    from workbench.rollout.arpo import branch_probability

    return branch_probability(h - h_init, tau, w)


def check_arpo_branch_probability(answer) -> str:
    """Exercise: ARPO's branch probability with the recipe's tau and w."""
    e = BRANCH_EXERCISE
    expected, given = arpo_branch_probability(), as_number(answer)
    if near(given, expected):
        return (f"correct: P = clip({e['tau']} + {e['w']} x {e['h'] - e['h_init']:.2f}, 0, 1) = {expected:.3f}; a rise "
                "in entropy makes a branch only a little more likely at w = 0.2")
    if given is None:
        hint = "answer one number, a probability"
    elif near(given, arpo_branch_probability(w=0.5)):
        hint = "that is the code's default w = 0.5; the recipe (ARPO's scripts) sets entropy_weight w = 0.2"
    elif near(given, arpo_branch_probability(h_init=e["h"], h=e["h_init"])):
        hint = "dH = H - H_init: the entropy rose, so P rises above tau"
    elif near(given, e["w"] * (e["h"] - e["h_init"])):
        hint = "tau is the base probability: P = clip(tau + w dH, 0, 1)"
    else:
        hint = "P = clip(tau + w (H - H_init), 0, 1)"
    raise AssertionError(f"not quite ({answer}): {hint}")


def off_policy_weights(p: float = WEIGHT_EXERCISE["p"], rl_plus_gamma: float = WEIGHT_EXERCISE["rl_plus_gamma"],
                       shaping_gamma: float = WEIGHT_EXERCISE["shaping_gamma"]) -> list[float]:
    """[RL-PLUS, LUFFY policy shaping]: the factor on A grad log pi of an external token with pi_theta = pi_old = p,
    each the derivative of its own loss term w.r.t. log pi (`objectives.rl_plus`, `objectives.policy_shaping`)."""
    from workbench.objectives.policy_shaping import shaped_probability
    from workbench.objectives.rl_plus import exploration_weight, mis_ratio

    logp = torch.tensor(math.log(p), dtype=torch.float64, requires_grad=True)
    rl_plus = mis_ratio(logp, logp.detach()) * exploration_weight(logp, rl_plus_gamma)  # A^c = A (1 - sg p)^gamma
    (d_rl_plus,) = torch.autograd.grad(rl_plus, logp)
    (d_shaping,) = torch.autograd.grad(shaped_probability(logp, shaping_gamma), logp)
    return [float(d_rl_plus), float(d_shaping)]


def check_off_policy_weights(answer) -> str:
    """Exercise: the weights RL-PLUS and LUFFY give a demonstration token the policy finds unlikely."""
    e = WEIGHT_EXERCISE
    expected, given = off_policy_weights(), as_numbers(answer)
    if all_near(answer, expected):
        return (f"correct: RL-PLUS {expected[0]:.3f}, LUFFY {expected[1]:.3f}; at p = 1 RL-PLUS's exploration weight "
                "and LUFFY's derivative both go to 0: a learnt demonstration stops pulling")
    p, g = e["p"], e["shaping_gamma"]
    if given is None or len(given) != 2:
        hint = "answer two numbers: [RL-PLUS's weight, LUFFY's weight]"
    elif near(given[0], 4 * p / (3 * p + 1)):
        hint = "RL-PLUS also multiplies A by the exploration weight (1 - pi_theta)^0.5"
    elif near(given[1], p / (p + g)):
        hint = ("that is f(p) = p / (p + gamma) itself; the weight on grad log pi is its derivative, "
                "gamma p / (p + gamma)^2")
    elif near(given[0], 1.0) or near(given[0], (1 - p) ** 0.5):
        hint = "the MIS ratio is 2 pi / (pi_old + (pi_old + 1)/2), not pi / pi_old"
    else:
        hint = ("RL-PLUS: 4p / (3p + 1) x (1 - p)^0.5 (the ratio's derivative w.r.t. log pi is the ratio); LUFFY: "
                "gamma p / (p + gamma)^2")
    raise AssertionError(f"not quite ({answer}): {hint}")
