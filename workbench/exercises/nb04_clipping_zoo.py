"""The exercises of notebook 04_clipping_zoo (the clipping zoo): each answer is checked against the library's own
math."""
from __future__ import annotations

import torch

from workbench.exercises.answers import all_near, as_number, as_numbers, near
from workbench.objectives.ppo import ppo_clip


def on_policy_clip_fraction(eps: float = 0.2, seed: int = 0) -> float:
    """PPO-clip's clip/region on a random batch scored by the policy that sampled it (logp == old_logp)."""
    gen = torch.Generator().manual_seed(seed)
    logp = -torch.rand(32, 8, generator=gen, dtype=torch.float64) * 5
    advantages = torch.randn(32, 8, generator=gen, dtype=torch.float64)
    _, metrics = ppo_clip(logp.clone().requires_grad_(True), logp.detach(), advantages, torch.ones_like(logp),
                          eps_low=eps, eps_high=eps)
    return metrics["clip/region"]


# exercise 1: minibatches=3, ppo_epochs=1 (mu = 3): the clip fractions of the second and third optimizer steps
CLIP_LOG_EXERCISE = (0.03, 0.09)


def logged_clip_fraction(later=CLIP_LOG_EXERCISE, eps: float = 0.2) -> float:
    """The clip/region the trainer logs for one rollout batch (the mean over its optimizer steps, `train_on`) when
    its optimizer steps after the first clip the fractions `later`: the first step's own fraction is PPO-clip's on
    a batch scored by the policy that sampled it (`on_policy_clip_fraction`)."""
    steps = [on_policy_clip_fraction(eps), *later]
    return sum(steps) / len(steps)


def check_logged_clip_fraction(answer, later=CLIP_LOG_EXERCISE, eps: float = 0.2) -> str:
    """Exercise: the mean clip fraction logged for a batch of mu = 3 optimizer steps whose last two clip 3% and
    9% of their tokens."""
    expected, given = logged_clip_fraction(later, eps), as_number(answer)
    if given is not None and abs(given - expected) <= 1e-6:
        return "correct"
    n = len(later) + 1
    if given is None:
        hint = "answer one number, a fraction of tokens"
    elif abs(given - sum(later) / len(later)) <= 1e-6:
        hint = (f"that is the mean of the later steps only; the trainer averages over all {n} optimizer steps, and "
                "the first optimizer step counts too: what is r there, and what does it clip?")
    elif abs(given - sum(later)) <= 1e-6:
        hint = f"the trainer logs the mean over the batch's {n} optimizer steps, not their sum"
    elif abs(given) <= 1e-6:
        hint = ("only the first optimizer step sees r = 1 everywhere; the later ones see a moved policy, and the "
                f"trainer logs the mean over all {n}")
    else:
        hint = (f"mu = {n} optimizer steps on the batch; on the first one old_logp comes from the very policy being "
                "trained. The trainer logs the mean of the steps' clip fractions")
    raise AssertionError(f"not quite ({answer}): {hint}")


ZOO_EXERCISE_KEYS = ("ppo-clip", "dual-clip", "cispo", "sapo", "gspo")


def nonzero_weight_objectives(keys=ZOO_EXERCISE_KEYS, ratio: float = 1.5, advantage: float = 1.0) -> set[str]:
    """The objectives (among `keys`, at their defaults) whose gradient weight at (ratio, advantage) is not 0."""
    from workbench.viz.weight_surfaces import gradient_weight_surface

    return {key for key in keys
            if abs(float(gradient_weight_surface(key, [ratio], [advantage])[0, 0])) > 1e-12}


def check_nonzero_weight_objectives(answer, ratio: float = 1.5, advantage: float = 1.0) -> str:
    """Exercise: which of ppo-clip, dual-clip, cispo, sapo, gspo still push a token at (ratio, advantage)?"""
    given = {answer} if isinstance(answer, str) else set(answer)
    if given != nonzero_weight_objectives(ratio=ratio, advantage=advantage):
        raise AssertionError(f"not quite: at r = {ratio}, A = {advantage:+g} find each objective's panel in the "
                             f"zoo; grey means zero gradient (choose among {list(ZOO_EXERCISE_KEYS)}, you gave "
                             f"{sorted(given)})")
    return "correct"


def negative_advantage_weights(ratio: float = 5.0, advantage: float = -1.0) -> tuple[float, float]:
    """(ppo-clip, dual-clip) gradient weights of one token at (ratio, advantage), both at their defaults."""
    from workbench.viz.weight_surfaces import gradient_weight_surface

    return tuple(float(gradient_weight_surface(key, [ratio], [advantage])[0, 0]) for key in ("ppo-clip", "dual-clip"))


def check_negative_advantage_weights(answer, ratio: float = 5.0, advantage: float = -1.0) -> str:
    """Exercise: the gradient weights of PPO-clip and dual-clip on a bad token whose probability grew 5×."""
    from workbench import registry

    expected = negative_advantage_weights(ratio, advantage)
    if all_near(answer, expected):
        return "correct"
    hp = registry.get("objective", "dual-clip").defaults
    c, eps = hp["dual_clip_c"], hp["eps_low"]
    given = as_numbers(answer)
    if given is not None and len(given) == 2 and near(given[0], 0.0, 1e-9):
        hint = (f"PPO-clip zeroes A < 0 only below r = 1 - eps = {1 - eps:g}; at r = {ratio:g} its unclipped "
                "branch r A is active, with no bound: that is what dual-clip is for")
    elif given is not None and len(given) == 2 and near(given[0], -expected[0]) and expected[0] != 0:
        hint = f"mind the sign: the weight is r A with A = {advantage:+g}, so the token is pushed down"
    elif given is not None and len(given) == 2 and near(given[0], expected[0]):
        hint = (f"PPO-clip is right; dual-clip caps the loss of A < 0 tokens at -c A (c = {c:g}): beyond r = c "
                "the cap is a constant, so what is its gradient?")
    else:
        hint = (f"answer a pair (PPO-clip, dual-clip); w = d(-l)/d log pi is r A on the unclipped branch and 0 on "
                f"a clipped or capped one (r = {ratio:g}, A = {advantage:+g}, eps = {eps:g}, c = {c:g})")
    raise AssertionError(f"not quite ({answer}): {hint}")
