"""The exercises of notebook 11_entropy (entropy): each answer is checked against the library's own math."""
from __future__ import annotations

import torch

from workbench.exercises.answers import as_number


ENTROPY_EXERCISE_LOGITS = (2.0, 1.0, 0.0, 0.0)


def entropy_at_temperature(logits=ENTROPY_EXERCISE_LOGITS, temperature: float = 0.5) -> float:
    """H(softmax(z / T)) in nats (`workbench.viz.entropy_controls.token_entropy`)."""
    from workbench.viz.entropy_controls import token_entropy

    return float(token_entropy(torch.tensor(logits, dtype=torch.float64), temperature))


def check_entropy_at_temperature(answer, logits=ENTROPY_EXERCISE_LOGITS, temperature: float = 0.5) -> str:
    """Exercise: the entropy of a distribution given by its logits, sampled at temperature T."""
    import math

    expected, given = entropy_at_temperature(logits, temperature), as_number(answer)
    if given is not None and abs(given - expected) <= 1e-3:
        return "correct"
    if given is None:
        hint = "answer one number, the entropy in nats"
    elif abs(given - entropy_at_temperature(logits, 1.0)) <= 1e-3:
        hint = f"that is the entropy at T = 1: sampling at T = {temperature:g} divides the logits by T first"
    elif abs(given - expected / math.log(2)) <= 1e-3:
        hint = "that is in bits (log base 2); the trainer's entropy is in nats (natural log)"
    elif abs(given - entropy_at_temperature(logits, 1 / temperature)) <= 1e-3:
        hint = f"that multiplies the logits by T; sampling at T = {temperature:g} divides them by T (sharper for T < 1)"
    else:
        hint = "p = softmax(z / T), then H = -sum_a p_a log p_a (natural log)"
    raise AssertionError(f"not quite ({answer}): {hint}")


COV_EXERCISE_ADVANTAGES = (1.5, 1.0, -0.5, -0.5, -1.0)
COV_EXERCISE_LOGPS = (-0.1, -2.0, -0.2, -1.5, -0.7)


def covariance_term(advantages=COV_EXERCISE_ADVANTAGES, logps=COV_EXERCISE_LOGPS, index: int = 0) -> float:
    """cov_t of token `index` when the tokens form one batch (`objectives.entropy_cov.token_covariance`)."""
    from workbench.objectives.entropy_cov import token_covariance

    adv = torch.tensor([advantages], dtype=torch.float64)
    logp = torch.tensor([logps], dtype=torch.float64)
    return float(token_covariance(logp, adv, torch.ones_like(logp))[0, index])


def check_covariance_term(answer, advantages=COV_EXERCISE_ADVANTAGES, logps=COV_EXERCISE_LOGPS, index: int = 0) -> str:
    """Exercise: the covariance term (A_t - mean A)(logp_t - mean logp) of one token."""
    expected, given = covariance_term(advantages, logps, index), as_number(answer)
    if given is not None and abs(given - expected) <= 1e-3:
        return "correct"
    mean_a, mean_lp = sum(advantages) / len(advantages), sum(logps) / len(logps)
    a, lp = advantages[index], logps[index]
    if given is None:
        hint = "answer one number"
    elif abs(given - (a - mean_a) * lp) <= 1e-3:
        hint = f"centre the log-prob too: subtract the mean log-prob {mean_lp:g}"
    elif abs(given - a * (lp - mean_lp)) <= 1e-3:
        hint = f"centre the advantage too: subtract the mean advantage {mean_a:g}"
    elif abs(given - a * lp) <= 1e-3:
        hint = f"both factors are centred: (A_t - {mean_a:g}) (log pi_t - ({mean_lp:g}))"
    elif abs(given + expected) <= 1e-3:
        hint = "mind the signs: a token above the mean in both factors has a positive product"
    else:
        hint = "cov_t = (A_t - mean A)(log pi_t - mean log pi), both means over the batch's tokens"
    raise AssertionError(f"not quite ({answer}): {hint}")


# Six tokens of one batch: advantages, log-probs (mean A = 0, mean log pi = -1, so cov = A (log pi + 1) =
# (2, 0.5, 1, 4, 3, 0)) and ratios r = pi / pi_old (token 3: A < 0 and r < 1 - eps, already clipped by PPO).
CLIP_COV_EXERCISE = {"advantages": (2.0, 1.0, 1.0, -2.0, -2.0, 0.0), "logps": (0.0, -0.5, 0.0, -3.0, -2.5, 0.0),
                     "ratios": (1.0, 1.0, 1.0, 0.7, 1.1, 1.0)}


def clip_cov_candidates(lb: float = 1.0, ub: float = 5.0, eps: float = 0.2, tokens=CLIP_COV_EXERCISE) -> set[int]:
    """The token indices `clip_cov_selection` counts as candidates (lb < cov < ub, not already clipped by PPO)."""
    from workbench.objectives.entropy_cov import clip_cov_selection

    logp = torch.tensor([tokens["logps"]], dtype=torch.float64)
    old_logp = logp - torch.tensor([tokens["ratios"]], dtype=torch.float64).log()
    adv = torch.tensor([tokens["advantages"]], dtype=torch.float64)
    _, candidates = clip_cov_selection(logp, old_logp, adv, torch.ones_like(logp), clip_cov_lb=lb, clip_cov_ub=ub,
                                       eps_low=eps, eps_high=eps)
    return {int(i) for i in torch.nonzero(candidates[0]).flatten()}


def check_clip_cov_candidates(answer, lb: float = 1.0, ub: float = 5.0, eps: float = 0.2) -> str:
    """Exercise: which tokens Clip-Cov may detach, given its band (lb, ub) and PPO's clip."""
    expected = clip_cov_candidates(lb, ub, eps)
    try:
        given = {int(answer)} if isinstance(answer, (int, float)) else {int(t) for t in answer}
    except (TypeError, ValueError):
        given = None
    if given == expected:
        return "correct"
    tokens = CLIP_COV_EXERCISE
    n = len(tokens["advantages"])
    mean_a, mean_lp = sum(tokens["advantages"]) / n, sum(tokens["logps"]) / n
    cov = [(a - mean_a) * (lp - mean_lp) for a, lp in zip(tokens["advantages"], tokens["logps"])]
    clipped = {t for t, (a, r) in enumerate(zip(tokens["advantages"], tokens["ratios"]))
               if (a > 0 and r > 1 + eps) or (a < 0 and r < 1 - eps)}
    if given is None:
        hint = "answer a set of token indices, e.g. {0, 2}"
    elif given & clipped:
        hint = (f"token(s) {sorted(given & clipped)} already have PPO's clipped branch active (A < 0 and r < 1 - eps): "
                "Clip-Cov excludes them")
    elif any(cov[t] in (lb, ub) for t in given):
        hint = f"the band is strict: lb < cov_t < ub, so cov_t = {lb:g} or {ub:g} is outside it"
    elif any(not lb < cov[t] < ub for t in given if 0 <= t < n):
        hint = (f"compute cov_t = (A_t - {mean_a:g})(log pi_t - ({mean_lp:g})) for each token: some you chose are "
                f"outside ({lb:g}, {ub:g})")
    else:
        hint = f"every token with {lb:g} < cov_t < {ub:g} that PPO has not clipped is a candidate: one is missing"
    raise AssertionError(f"not quite ({answer}): {hint}")


# exercise 4: the token entropies of a batch (nats) and the target: three of five tokens above it, their mean below
ALPHA_EXERCISE = {"entropies": (0.9, 0.8, 0.7, 0.1, 0.2), "target_entropy": 0.6}


def alpha_direction(entropy=ALPHA_EXERCISE["entropies"],
                    target_entropy: float = ALPHA_EXERCISE["target_entropy"]) -> str:
    """"rise" or "fall": where one step of the `sac-temperature` controller (SGD on log alpha, its default
    token-mean) moves alpha, given the batch's token entropies (one number: a batch of one token)."""
    from workbench.controllers.sac_temperature import Temperature, descend, log_alpha_grad

    state = Temperature(log_alpha=0.0, target_entropy=target_entropy, lr=0.1, optimizer="sgd")
    entropies = torch.as_tensor(entropy, dtype=torch.float64).reshape(1, -1)  # [1, T]: one response
    g = log_alpha_grad(state, entropies, torch.ones_like(entropies))
    before = state.log_alpha
    after = descend(state, g).log_alpha
    return "fall" if after < before else "rise" if after > before else "stay"


ALPHA_WORDS = {"rise": "rise", "rises": "rise", "up": "rise", "increase": "rise", "increases": "rise",
               "fall": "fall", "falls": "fall", "down": "fall", "decrease": "fall", "decreases": "fall"}


def check_alpha_direction(answer, entropy=ALPHA_EXERCISE["entropies"],
                          target_entropy: float = ALPHA_EXERCISE["target_entropy"]) -> str:
    """Exercise: does SAC's temperature alpha rise or fall after a batch with these token entropies?"""
    expected = alpha_direction(entropy, target_entropy)
    given = ALPHA_WORDS.get(str(answer).strip().lower()) if isinstance(answer, str) else None
    if given == expected:
        return "correct"
    values = torch.as_tensor(entropy, dtype=torch.float64).flatten().tolist()
    mean = sum(values) / len(values)
    if given is None:
        hint = 'answer "rise" or "fall"'
    else:
        gap = mean - target_entropy
        hint = (f"J(alpha) = alpha (H - target) with H the token-mean of the batch's entropies, {mean:.3g}, so "
                f"dJ/dlog(alpha) = alpha ({mean:.3g} - {target_entropy:g}) = alpha ({gap:+.3g}); the controller steps "
                "against that gradient. "
                + ("Too much entropy should weaken the bonus, not strengthen it" if gap > 0 else
                   "Too little entropy should strengthen the bonus, not weaken it"))
    raise AssertionError(f"not quite ({answer}): {hint}")
