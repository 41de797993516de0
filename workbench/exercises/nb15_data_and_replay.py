"""The exercises of notebook 15_data_and_replay (data selection and replay): each answer is checked against the
library's own functions (PCL's effective ratio, Resample-on-Correct's quotas, DOTS's selection probabilities)."""
from __future__ import annotations

import torch

from workbench.exercises.answers import all_near, as_number, as_numbers, near

SIGNAL_EXERCISE = {"pass_rates": (0.1, 0.5), "G": 8}
ROC_EXERCISE = {"n": 16, "correct": 3, "keep": 8, "min_negative": 2, "min_positive": 2}
DOTS_EXERCISE = {"d_hat": (0.5, 0.4, 0.9), "alpha": 0.5, "tau": 0.1, "which": 1}


def signal_shares(pass_rates=SIGNAL_EXERCISE["pass_rates"], G: int = SIGNAL_EXERCISE["G"]) -> list[float]:
    """rho(p, G) = 1 - p^G - (1 - p)^G for each pass rate (`samplers.pcl.effective_ratio`)."""
    from workbench.samplers.pcl import effective_ratio

    return [float(effective_ratio(p, G)) for p in pass_rates]


def check_signal_shares(answer) -> str:
    """Exercise: the share of groups with a signal at p = 0.1 and p = 0.5, G = 8."""
    expected, G = signal_shares(), SIGNAL_EXERCISE["G"]
    if all_near(answer, expected):
        return (f"correct: {expected[0]:.3f} and {expected[1]:.3f}: a prompt solved 1 time in 10 gives a signal in "
                "little over half its groups; one solved half the time in almost all")
    given = as_numbers(answer)
    if given is None or len(given) != 2:
        hint = "answer two numbers, rho(0.1, 8) first"
    elif all_near(given, [1 - p ** G for p in SIGNAL_EXERCISE["pass_rates"]]):
        hint = "a group is also without signal when every sample fails: subtract (1 - p)^G too"
    elif all_near(given, [p ** G + (1 - p) ** G for p in SIGNAL_EXERCISE["pass_rates"]]):
        hint = "that is the share WITHOUT a signal (all equal); the question asks for 1 minus it"
    else:
        hint = "rho(p, G) = 1 - p^G - (1 - p)^G"
    raise AssertionError(f"not quite ({answer}): {hint}")


def roc_counts(**overrides) -> list[int]:
    """[correct kept, wrong kept] of a group of n traces (`transforms.grpo_roc.quotas`)."""
    from workbench.transforms.grpo_roc import quotas

    e = {**ROC_EXERCISE, **overrides}
    k_neg, k_pos = quotas(e["n"] - e["correct"], e["correct"], e["keep"], e["min_negative"], e["min_positive"])
    return [k_pos, k_neg]


def check_roc_counts(answer) -> str:
    """Exercise: RoC's kept correct and wrong traces of 16 with 3 correct, G = 8."""
    expected, e = roc_counts(), ROC_EXERCISE
    if all_near(answer, expected, tol=0):
        return (f"correct: {expected}: k_- = round({e['n'] - e['correct']} x {e['keep']} / {e['n']}) = round(6.5) = 6 "
                "(a half to the even neighbour), k_+ = 8 - 6 = 2, which meets the minimum of 2")
    given = as_numbers(answer)
    if given is None or len(given) != 2:
        hint = "answer two whole numbers, correct traces first"
    elif all_near(given, [1, 7], tol=0):
        hint = "k_- = round(13 x 8 / 16) = round(6.5): Python (and the reference) round a half to even, 6"
    elif all_near(given, expected[::-1], tol=0):
        hint = "correct traces first, then the wrong ones"
    elif sum(given) != e["keep"]:
        hint = f"RoC keeps exactly G = {e['keep']} traces of the group"
    else:
        hint = "the wrong traces keep their share: k_- = round(n_- G / n), k_+ = G - k_-, at least 2 of each"
    raise AssertionError(f"not quite ({answer}): {hint}")


def dots_probability(**overrides) -> float:
    """P(the first draw is prompt `which`) = softmax(-|d^ - alpha| / tau)[which] (`samplers.dots.selection_logits`)."""
    from workbench.samplers.dots import selection_logits

    e = {**DOTS_EXERCISE, **overrides}
    logits = selection_logits(torch.tensor(e["d_hat"], dtype=torch.float64), e["alpha"], e["tau"])
    return float(torch.softmax(logits, 0)[e["which"]])


def check_dots_probability(answer) -> str:
    """Exercise: DOTS's probability of the prompt with d^ = 0.4 at tau = 0.1."""
    expected, given = dots_probability(), as_number(answer)
    if near(given, expected):
        return (f"correct: e^-1 / (1 + e^-1 + e^-4) = {expected:.4f}; at the recipe's tau = 1e-3 it would be "
                f"{dots_probability(tau=1e-3):.1e}: nearly greedy towards d^ = alpha")
    if given is None:
        hint = "answer one number, a probability"
    elif near(given, dots_probability(tau=1e-3)):
        hint = "the exercise uses the softer tau = 0.1, not the recipe's 1e-3"
    elif near(given, float(torch.exp(torch.tensor(-1.0)))):
        hint = "that is the unnormalised weight e^-1: divide by the sum over the three prompts"
    else:
        hint = "P = softmax(-|d^ - alpha| / tau) over the three prompts, at the second one"
    raise AssertionError(f"not quite ({answer}): {hint}")
