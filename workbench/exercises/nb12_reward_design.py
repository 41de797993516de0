"""The exercises of notebook 12_reward_design (reward design): each answer is checked against the library's own
math."""
from __future__ import annotations

import torch

from workbench.advantages.group import grpo
from workbench.batch import RolloutBatch
from workbench.exercises.answers import as_number


COSINE_EXERCISE = {"length": 4, "max_len": 12, "correct": True}  # a right answer of 4 tokens, budget 12


def cosine_length_value(length: int = COSINE_EXERCISE["length"], max_len: int = COSINE_EXERCISE["max_len"],
                        correct: bool = True, **hp) -> float:
    """The registered `cosine-length` reward of one answer of `length` tokens (defaults unless `hp` says)."""
    from workbench import registry

    fn = registry.get("reward", "cosine-length").fn
    return float(fn(["x" * length], [[0] * length], max_len=max_len, scores=[1.0 if correct else 0.0], **hp)[0])


def check_cosine_length_value(answer, length: int = COSINE_EXERCISE["length"],
                              max_len: int = COSINE_EXERCISE["max_len"]) -> str:
    """Exercise: the cosine length-scaled reward of a right answer of 4 tokens with L = 12, by hand."""
    import math

    expected, given = cosine_length_value(length, max_len), as_number(answer)
    if given is not None and abs(given - expected) <= 1e-3:
        return "correct"
    u = length / max_len
    if given is None:
        hint = "answer one number, the reward"
    elif abs(given - cosine_length_value(length, max_len, correct=False)) <= 1e-3:
        hint = "that is a wrong answer's reward (from -1 towards -0.5); a right one runs from 1.0 (short) to 0.5"
    elif abs(given - (0.5 + 0.5 * math.cos(math.pi * u))) <= 1e-3:
        hint = "the cosine enters as (1 + cos(pi u)) / 2, which runs from 1 to 0: r = lo + (hi - lo)(1 + cos(pi u))/2"
    elif abs(given - (1.0 - 0.25 * (1 + math.cos(math.pi * u)))) <= 1e-3:
        hint = "the bounds are the other way round: at |y| = 0 a right answer gets the maximum 1.0, at |y| = L 0.5"
    elif abs(given - (0.5 + 0.25 * (1 + math.cos(u)))) <= 1e-3:
        hint = f"the angle is pi u in radians: cos(pi x {u:.4g}), not cos({u:.4g})"
    else:
        hint = (f"u = |y| / L = {u:g}; for a right answer lo = 0.5, hi = 1.0 and r = lo + (hi - lo)(1 + cos(pi u)) / 2")
    raise AssertionError(f"not quite ({answer}): {hint}")


# one group of four: the verifier's 0/1 and a reward model's score on a 0..10 scale (weight 0.5)
AGGREGATION_EXERCISE = {"correct": (1.0, 0.0, 0.0, 1.0), "scores": (2.0, 8.0, 6.0, 3.0), "weight": 0.5}


def dominant_aggregations(correct=AGGREGATION_EXERCISE["correct"], scores=AGGREGATION_EXERCISE["scores"],
                          weight: float = AGGREGATION_EXERCISE["weight"]) -> set[str]:
    """The reward_aggregation modes under which every right answer gets a larger GRPO advantage than every wrong
    one (`rewards.aggregate.combine`, then the `grpo` advantage), the verifier with weight 1."""
    from workbench.rewards.aggregate import AGGREGATIONS, combine

    values = torch.tensor([list(correct), list(scores)], dtype=torch.float64).T        # [B, 2]
    weights = torch.tensor([1.0, weight], dtype=torch.float64)
    group = torch.zeros(len(correct), dtype=torch.long)
    right = torch.tensor(correct) >= 1
    out = set()
    for mode in AGGREGATIONS:
        rewards, _ = combine(values, weights, group, mode)
        advantages = grpo(RolloutBatch.from_rewards(rewards))[:, 0]
        if float(advantages[right].min()) > float(advantages[~right].max()):
            out.add(mode)
    return out


def check_dominant_aggregation(answer) -> str:
    """Exercise: which aggregation keeps every right answer above every wrong one?"""
    from workbench.rewards.aggregate import AGGREGATIONS

    expected = dominant_aggregations()
    if isinstance(answer, str):
        given = {answer.strip()}
    else:
        try:
            given = {str(a).strip() for a in answer}
        except TypeError:
            given = None
    if given == expected:
        return "correct"
    if given is None or not given <= set(AGGREGATIONS):
        hint = f"answer the name of a mode, {' or '.join(repr(m) for m in AGGREGATIONS)} (or a set of them)"
    elif "sum_then_normalize" in given:
        hint = ("under sum_then_normalize R = correct + 0.5 x score: the wrong answer with score 8 gets 4.0, above "
                "the right answers' 2.0 and 2.5; the score's 0..10 scale drowns the 0/1 verdict")
    else:
        hint = ("z-score each reward within the group first, then sum with weights 1 and 0.5: is every right answer "
                "still on top?")
    raise AssertionError(f"not quite ({answer}): {hint}")


SOFT_OVERLONG_EXERCISE = {"max_len": 10, "buffer": 3}


def soft_overlong_first_length(max_len: int = 10, buffer: int = 3) -> int:
    """The shortest response length (tokens) the registered `soft-overlong` reward penalizes (< 0)."""
    from workbench import registry

    fn = registry.get("reward", "soft-overlong").fn
    lengths = range(1, max_len + 1)
    values = fn(["x" * n for n in lengths], [[0] * n for n in lengths], buffer=buffer, max_completion_len=max_len)
    return next(n for n, v in zip(lengths, values) if v < 0)


def check_soft_overlong_first_length(answer, max_len: int = 10, buffer: int = 3) -> str:
    """Exercise: the first length at which DAPO's soft overlong punishment bites (L = 10, C = 3)."""
    expected, given = soft_overlong_first_length(max_len, buffer), as_number(answer)
    if given is not None and given == expected:
        return "correct"
    if given is None:
        hint = "answer one length in tokens"
    elif given == max_len - buffer:
        hint = (f"at |y| = L - C = {max_len - buffer} the penalty is ((L - C) - |y|) / C = 0: the buffer starts "
                "just after it")
    elif given == buffer:
        hint = "C is the width of the buffer at the END of the budget, not a length from the start"
    elif given > max_len:
        hint = f"the penalty reaches -1 at |y| = L = {max_len}; it starts inside the buffer"
    else:
        hint = f"the penalty is ((L - C) - |y|) / C for L - C < |y| <= L (here L = {max_len}, C = {buffer})"
    raise AssertionError(f"not quite ({answer}): {hint}")


SSL_EXERCISE = {"answer": "48", "gold": "40"}  # a near miss: 20% off, on the edge of the 2 sigma ring


def ssl_tier_value(answer: str = SSL_EXERCISE["answer"], gold: str = SSL_EXERCISE["gold"], **hp) -> float:
    """The registered `ssl` reward (distance tiers, defaults: sigma 0.1, K = 4) of one unsolved answer."""
    from workbench import registry

    return float(registry.get("reward", "ssl").fn([answer], answer=[gold], scores=[0.0], **hp)[0])


def check_ssl_tier(answer, pred: str = SSL_EXERCISE["answer"], gold: str = SSL_EXERCISE["gold"]) -> str:
    """Exercise: SSL's tiered reward of the answer 48 to a question whose gold is 40."""
    from workbench.rewards.ssl import EDGES, VALUES, answer_distance

    expected, given = ssl_tier_value(pred, gold), as_number(answer)
    if given is not None and abs(given - expected) <= 1e-9:
        return "correct"
    sigma, d = 0.1, answer_distance(pred, gold)
    rings = list(zip(EDGES, VALUES))[1:]                       # (edge in sigma, reward) outside the exact tier
    edge = next((k for k, (e, _) in enumerate(rings) if d == e * sigma), None)  # d exactly on a ring's edge
    if given is None:
        hint = "answer one number, the tier's reward"
    elif abs(given - 1.0) <= 1e-9:
        hint = f"1 is the exact tier (d = 0, a solved answer); {pred} is not the gold"
    elif edge is not None and abs(given - (rings[edge + 1][1] if edge + 1 < len(rings) else 0.0)) <= 1e-9:
        hint = (f"the edges are inclusive, d <= e_k sigma: d = {d:g} is exactly on the {rings[edge][0]:g} sigma "
                "edge, so in that ring")
    elif any(abs(given - v) <= 1e-9 and v > expected for _, v in rings):
        e, v = next((e, v) for e, v in rings if abs(given - v) <= 1e-9)
        hint = (f"d = |{pred} - {gold}| / max(|{gold}|, 1) = {d:g} = {d / sigma:g} sigma: outside the {e:g} sigma "
                f"ring (reward {v:g})")
    elif abs(given) <= 1e-9:
        hint = f"the distance is relative, |pred - gold| / max(|gold|, 1) = {d:g}: not beyond every ring"
    else:
        hint = ("d = |pred - gold| / max(|gold|, 1); the tiers pay 1, 0.6, 0.3, 0.1 for d <= 0, 0.5, 1, 2 sigma "
                "(sigma = 0.1), 0 beyond")
    raise AssertionError(f"not quite ({answer}): {hint}")
