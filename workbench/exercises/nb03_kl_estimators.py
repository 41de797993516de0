"""The exercises of notebook 03_kl_estimators (KL estimators): each answer is checked against the library's own
math."""
from __future__ import annotations

import torch


def k1_sign(p: float = 0.1, p_ref: float = 0.4) -> str:
    """Sign of the k1 estimate on a sampled token with π(y) = p and π_ref(y) = p_ref."""
    from workbench import kl

    value = float(kl.estimate(torch.tensor([p], dtype=torch.float64).log(),
                              torch.tensor([p_ref], dtype=torch.float64).log(), "k1")[0])
    return "zero" if value == 0 else "positive" if value > 0 else "negative"


def check_k1_sign(answer: str, p: float = 0.1, p_ref: float = 0.4) -> str:
    """Exercise: is k1 positive, negative or zero on this token?"""
    if answer != k1_sign(p, p_ref):
        raise AssertionError(f"not quite: k1 = log π(y) − log π_ref(y) with π(y) = {p}, π_ref(y) = {p_ref} "
                             "(answer 'positive', 'negative' or 'zero')")
    return "correct"


def nonnegative_estimators(kinds=("k1", "k2", "k3", "abs")) -> set[str]:
    """The estimators whose per-token value is >= 0 for every log-ratio on a grid over [-10, 10]."""
    from workbench import kl

    logr = torch.linspace(-10, 10, 2001, dtype=torch.float64)
    return {kind for kind in kinds if bool((kl.estimate(logr, torch.zeros_like(logr), kind) >= 0).all())}


def check_nonnegative_estimators(answer) -> str:
    """Exercise: which of k1, k2, k3, abs are never negative, whatever the token?"""
    given = {answer} if isinstance(answer, str) else set(answer)
    if given != nonnegative_estimators():
        raise AssertionError("not quite: write each estimator as a function of logr = log π − log π_ref and "
                             f"check its sign for logr < 0 and logr > 0 (you gave {sorted(given)})")
    return "correct"


# exercise 3: sums and differences of the estimators, used as a loss (two of them have the reverse-KL gradient)
KL_COMBINATION_EXERCISE = ("k1 + k2", "k3 - k1", "k2 + k3", "k2 - k1")


def kl_combination(expression: str) -> dict[str, float]:
    """The coefficients of a sum or difference of the registered estimators k1, k2, k3, abs: "k2 - k1" ->
    {"k2": 1, "k1": -1} ("2 * k2", a plain key, spaces optional; no straight-through `+` kinds, whose `+` would read
    as a sum). ValueError for anything else."""
    import re

    from workbench import kl

    text = expression.replace(" ", "")
    terms = re.findall(r"([+-]?)(?:(\d+(?:\.\d+)?)\*)?([a-z0-9]+)", text)
    if not text or "".join(sign + (f"{c}*" if c else "") + key for sign, c, key in terms) != text:
        raise ValueError(f"not a sum or difference of KL estimators: {expression!r}")
    out: dict[str, float] = {}
    for sign, coef, key in terms:
        if key not in kl.ESTIMATORS:
            raise ValueError(f"unknown KL estimator {key!r} in {expression!r}")
        out[key] = out.get(key, 0.0) + (-1.0 if sign == "-" else 1.0) * float(coef or 1)
    return out


def reverse_kl_gradient_estimators(kinds=KL_COMBINATION_EXERCISE, vocab: int = 8, seed: int = 0) -> set[str]:
    """The estimators (keys, or sums and differences of them: `kl_combination`) whose expected on-policy gradient,
    used as a loss, equals ∇KL(π‖π_ref) on a random categorical (exact sums over the vocabulary)."""
    from workbench import kl

    gen = torch.Generator().manual_seed(seed)
    theta0 = torch.randn(vocab, generator=gen, dtype=torch.float64)
    ref_logp = torch.log_softmax(torch.randn(vocab, generator=gen, dtype=torch.float64), -1)
    weights = torch.softmax(theta0, -1)

    def grad_of(fn):
        theta = theta0.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(fn(torch.log_softmax(theta, -1)), theta)
        return g

    def loss(lp, expression):
        terms = kl_combination(expression).items()
        return sum(c * (weights * kl.estimate(lp, ref_logp, key)).sum() for key, c in terms)

    target = grad_of(lambda lp: (lp.exp() * (lp - ref_logp)).sum())
    return {kind for kind in kinds if torch.allclose(grad_of(lambda lp, kind=kind: loss(lp, kind)), target, atol=1e-10)}


def check_reverse_kl_gradient(answer, kinds=KL_COMBINATION_EXERCISE) -> str:
    """Exercise: which of k1 + k2, k3 - k1, k2 + k3, k2 - k1, used as a loss on samples of π, has the gradient of
    KL(π‖π_ref)?"""
    expected = reverse_kl_gradient_estimators(kinds)
    try:
        given = {answer} if isinstance(answer, str) else set(answer)
        coefficients = {frozenset(kl_combination(k).items()): k for k in kinds}
        given = {coefficients.get(frozenset(kl_combination(str(g)).items()), str(g)) for g in given}
    except (TypeError, ValueError):
        given = None
    if given == expected:
        return "correct"
    if given is None or not given <= set(kinds):
        hint = f"answer a list of the expressions, chosen among {list(kinds)}"
    elif any("k3" in kl_combination(g) for g in given if g in kinds):
        hint = ("the expected gradient is linear in the loss: E[grad k3] is the forward KL's, and adding or "
                "subtracting k1 or k2 does not cancel it")
    else:
        hint = ("the expected gradient is linear in the loss: average grad k_x over y ~ π for each estimator "
                "(E[grad k1] = sum_y grad π(y) = ?), then add them up")
    raise AssertionError(f"not quite ({sorted(given) if given else answer}): {hint}")
