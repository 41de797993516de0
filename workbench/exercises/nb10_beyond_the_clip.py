"""The exercises of notebook 10_beyond_the_clip (beyond the clip): each answer is checked against the library's own
math."""
from __future__ import annotations

import torch

from workbench.batch import RolloutBatch
from workbench.exercises.answers import all_near, as_numbers, near


GBPO_EXERCISE_REWARDS = (1.0, 0.0, 0.0, 0.0, 0.0)  # one correct answer in a group of five


def gbpo_target_ratios(rewards=GBPO_EXERCISE_REWARDS, *, median: bool = True,
                       temperature: float = 1.0) -> tuple[float, float]:
    """(target ratio rho* of a correct answer, of a wrong one) in one group of 0/1 rewards: the registered `gbpo`
    advantage's target advantage through the `gbpo` objective's `target_ratio` (eps 0.2 / 0.2). median=False centres
    on the group mean instead (rho* from the GRPO z-score: the plausible slip the check explains)."""
    from workbench import registry
    from workbench.objectives.gbpo import target_ratio

    batch = RolloutBatch.from_rewards(rewards)
    advantages = registry.get("advantage", "gbpo").fn(batch, temperature=temperature)
    hp = registry.get("objective", "gbpo").defaults
    target = batch.target_adv[:, 0] if median else advantages[:, 0]
    rho = target_ratio(target, eps_low=hp["eps_low"], eps_high=hp["eps_high"])
    r = torch.as_tensor(rewards, dtype=torch.float64)
    return float(rho[r == 1][0]), float(rho[r == 0][0])


def check_gbpo_target_ratios(answer, rewards=GBPO_EXERCISE_REWARDS) -> str:
    """Exercise: GBPO's target ratio for the correct and for a wrong answer of a 1-in-5 group (T = 1, eps 0.2)."""
    if all_near(answer, gbpo_target_ratios(rewards)):
        return "correct"
    if all_near(answer, gbpo_target_ratios(rewards, median=False)):
        hint = ("GBPO's target advantage is centred on the group MEDIAN, not the mean: with one correct answer in "
                "five the median reward is 0, so what is a wrong answer's target advantage, and sigma of it?")
    elif all_near(answer, gbpo_target_ratios(rewards, temperature=1e-4)):
        hint = ("that is the sharp split of T -> 0 (the reference's TTRL scripts); at T = 1 the target is smooth: "
                "rho* = 1 - eps_low + (eps_low + eps_high) sigma(A_hat)")
    else:
        hint = ("A_hat = (R - median_g R) / (std_g R + 1e-6) with the Bessel std, then rho* = 0.8 + 0.4 sigma(A_hat); "
                "answer a pair (correct answer, wrong answer)")
    raise AssertionError(f"not quite ({answer}): {hint}")


# label -> (ratio r, advantage A): A > 0 is a token of a correct response, A < 0 of an incorrect one
DISPO_EXERCISE_TOKENS = {"a": (1.25, 1.0), "b": (0.75, 1.0), "c": (1.3, -1.0), "d": (0.85, -1.0), "e": (1.35, 1.0)}


def dispo_masked_tokens(tokens=DISPO_EXERCISE_TOKENS, **bounds) -> set[str]:
    """The labels of `tokens` DISPO gives no gradient (outside their class's band), at the registered defaults
    (0.2 / 0.28 for both classes) unless `bounds` says otherwise: the objective's own `dispo_weight` mask."""
    from workbench import registry
    from workbench.objectives.dispo import BOUNDS, dispo_weight

    hp = {**{k: registry.get("objective", "dispo").defaults[k] for k in BOUNDS}, **bounds}
    r = torch.tensor([[v[0] for v in tokens.values()]], dtype=torch.float64)
    a = torch.tensor([[v[1] for v in tokens.values()]], dtype=torch.float64)
    _, inside = dispo_weight(r, a, **hp)
    return {label for label, keep in zip(tokens, inside[0].tolist()) if not keep}


def check_dispo_masked_tokens(answer, tokens=DISPO_EXERCISE_TOKENS) -> str:
    """Exercise: which tokens does DISPO (defaults) mask?"""
    expected = dispo_masked_tokens(tokens)
    given = {answer} if isinstance(answer, str) else set(answer) if answer is not None else None
    if given == expected:
        return "correct"
    ppo = {k for k, (r, a) in tokens.items() if (a > 0 and r > 1.28) or (a < 0 and r < 0.8)}
    if given == ppo:
        hint = ("that is PPO's one-sided rule (past the band in the advantage's direction only); DISPO masks every "
                "token outside [1 - eps_low, 1 + eps_high], on both sides")
    elif given is not None and given - expected:
        hint = f"token(s) {sorted(given - expected)} are inside their class's band [0.8, 1.28]: they keep r A"
    else:
        hint = ("a token is masked when r < 1 - eps_low or r > 1 + eps_high of its class (0.2 / 0.28 for both "
                "classes here), whatever the sign of A; answer a set of labels")
    raise AssertionError(f"not quite ({answer}): {hint}")


BAPO_EXERCISE_TOKENS = ((1.1, 1.0), (1.5, 1.0), (0.72, -1.0), (1.0, -1.0), (0.5, -1.0))  # (ratio r, advantage A)


def bapo_exercise(tokens=BAPO_EXERCISE_TOKENS, *, reference_bug: bool = False) -> tuple[float, float]:
    """(positive share pos / (pos + neg) at BAPO's start bounds, c_low after BAPO's search) for one token each,
    from the objective's own `contributions` and `adapt_bounds` at the registered defaults."""
    from workbench import registry
    from workbench.objectives.bapo import adapt_bounds, contributions

    hp = {k: v for k, v in registry.get("objective", "bapo").defaults.items()
          if k in ("c_low", "c_low_max", "c_high", "c_high_max", "step_low", "step_high", "rho0", "eps", "dual_clip_c")}
    r = torch.tensor([[t[0] for t in tokens]], dtype=torch.float64)
    a = torch.tensor([[t[1] for t in tokens]], dtype=torch.float64)
    mask = torch.ones_like(r)
    pos, neg = contributions(r, a, mask, hp["c_low"], hp["c_high"], dual_clip_c=hp["dual_clip_c"],
                             reference_bug=reference_bug)
    bounds = adapt_bounds(r, a, mask, **hp, reference_bug=reference_bug)
    return float(pos / (pos + neg)), bounds.c_low


def check_bapo_exercise(answer, tokens=BAPO_EXERCISE_TOKENS) -> str:
    """Exercise: BAPO's positive share of five tokens at its start bounds, and the c_low its search settles on."""
    share, c_low = bapo_exercise(tokens)
    if all_near(answer, (share, c_low)):
        return "correct"
    given = as_numbers(answer)
    everything = sum(r * a for r, a in tokens if a > 0) / sum(r * abs(a) for r, a in tokens)
    if given is None or len(given) != 2:
        hint = "answer a pair (positive share at the start bounds, c_low after the search)"
    elif near(given[0], everything):
        hint = ("you counted every token; BAPO counts only tokens that carry gradient: a positive token above c_high "
                "= 1.2 is clipped, a negative one below c_low = 0.6 too")
    elif near(given[0], bapo_exercise(tokens, reference_bug=True)[0]):
        hint = ("that is the reference code's effective-ratio counting (min(r, c_high) / max(r, c_low) over every "
                "token, `reference_bug=True`); the workbench counts the tokens that carry gradient")
    elif near(given[0], share):
        hint = ("the share is right; the search raises c_low by 0.05 from 0.6 (up to 0.8) while pos / neg < 1: "
                "which step drops the negative token at r = 0.72 from the count?")
    else:
        hint = ("pos = sum of r A over A > 0 tokens with r <= c_high, neg = sum of r |A| over A < 0 tokens with "
                "c_low <= r <= 3; share = pos / (pos + neg)")
    raise AssertionError(f"not quite ({answer}): {hint}")


SHAPING_EXERCISE_PROBS = (0.1, 0.9)


def shaping_weights(probs=SHAPING_EXERCISE_PROBS, gamma: float | None = None) -> tuple[float, ...]:
    """Gradient weight d(-l)/d(log p) of an off-policy token with A = 1 at each probability p, by autograd through the
    registered `policy-shaping` objective (gamma: its default 0.1 unless given)."""
    from workbench import ops, registry

    entry = registry.get("objective", "policy-shaping")
    logp = torch.log(torch.tensor(probs, dtype=torch.float64))[:, None].requires_grad_(True)
    ones = torch.ones_like(logp)
    loss, _ = entry.fn(logp, logp.detach(), ones, ones, offpolicy_mask=ones, agg="token-mean",
                       denom=ops.Denominators(num_tokens=1.0, num_seqs=1.0, norm_constant=1.0),
                       gamma=entry.defaults["gamma"] if gamma is None else gamma)
    (grad,) = torch.autograd.grad(-loss, logp)
    return tuple(float(g) for g in grad[:, 0])


def check_shaping_weights(answer, probs=SHAPING_EXERCISE_PROBS) -> str:
    """Exercise: policy-shaping's gradient weight on an off-policy token (A = 1, gamma = 0.1) at p = 0.1 and 0.9."""
    expected = shaping_weights(probs)
    if all_near(answer, expected):
        return "correct"
    gamma = 0.1
    if all_near(answer, [p / (p + gamma) for p in probs]):
        hint = "that is the shaped value f(p) = p / (p + gamma); the weight is its derivative in log p"
    elif all_near(answer, [1.0] * len(probs)):
        hint = "that is plain REINFORCE on log p (weight 1 for every token); shaping multiplies by df/dlog p"
    elif all_near(answer, list(probs)):
        hint = "that is the weight of a loss on p itself (dp/dlog p = p); the shaped loss is on f(p) = p / (p + gamma)"
    else:
        hint = ("f(p) = p / (p + gamma), and d f / d log p = p f'(p) = gamma p / (p + gamma)^2; answer one number per "
                "probability")
    raise AssertionError(f"not quite ({answer}): {hint}")
