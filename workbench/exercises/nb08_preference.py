"""The exercises of notebook 08_preference (preference optimization): each answer is checked against the library's
own math."""
from __future__ import annotations

import torch


PAIRWISE_EXERCISE_KEYS = ("dpo", "ipo", "cdpo-robust", "hinge", "simpo")


def _pair_inputs(chosen, rejected, ref_chosen, ref_rejected):
    as_t = lambda v: torch.tensor([float(v)], dtype=torch.float64)  # noqa: E731
    c = as_t(chosen).requires_grad_(True)
    r = as_t(rejected).requires_grad_(True)
    return c, r, as_t(ref_chosen), as_t(ref_rejected)


def dpo_weight_at(delta: float = 0.0, beta: float = 0.1) -> float:
    """−∂L/∂Δ of the registered `dpo` loss for one pair with log-ratio margin Δ (autograd)."""
    from workbench import registry

    c, r, rc, rr = _pair_inputs(delta, 0.0, 0.0, 0.0)
    loss, _ = registry.get("preference", "dpo").fn(c, r, rc, rr, beta=beta)
    (grad,) = torch.autograd.grad(loss, c)
    return -float(grad[0])


def check_dpo_weight_at_zero(answer, beta: float = 0.1) -> str:
    """Exercise: DPO's per-pair gradient weight −∂L/∂Δ at margin Δ = 0 (policy = reference)."""
    expected = dpo_weight_at(0.0, beta)
    if not abs(float(answer) - expected) <= 1e-9 + 1e-6 * abs(expected):
        raise AssertionError(f"not quite: differentiate −log σ(βΔ) with respect to Δ and set Δ = 0 (β = {beta}; "
                             f"you gave {answer})")
    return "correct"


def reference_free_losses(keys=PAIRWISE_EXERCISE_KEYS) -> set[str]:
    """The registered pairwise losses whose value and gradient do not change when the reference log-probs do."""
    from workbench import registry

    def run(key, ref_chosen, ref_rejected):
        c, r, rc, rr = _pair_inputs(-3.0, -5.0, ref_chosen, ref_rejected)
        extra = {"chosen_len": torch.tensor([3.0], dtype=torch.float64),
                 "rejected_len": torch.tensor([4.0], dtype=torch.float64)} if key == "simpo" else {}
        loss, _ = registry.get("preference", key).fn(c, r, rc, rr, **extra)
        grads = torch.autograd.grad(loss, (c, r))
        return torch.cat([loss.detach().view(1), *grads])

    return {key for key in keys if torch.equal(run(key, -4.0, -4.5), run(key, -1.0, -7.0))}


def check_reference_free(answer) -> str:
    """Exercise: which of dpo, ipo, cdpo-robust, hinge, simpo never reads the reference model?"""
    given = {answer} if isinstance(answer, str) else set(answer)
    if given != reference_free_losses():
        raise AssertionError("not quite: look for the loss whose implicit reward is built from log π alone "
                             f"(choose among {list(PAIRWISE_EXERCISE_KEYS)}, you gave {sorted(given)})")
    return "correct"


def pure_rock_exploitability(strength: float = 0.9) -> float:
    """Exploitability max_y P(y ≻ π) − ½ of the pure policy "always rock" in rock–paper–scissors."""
    from workbench.preference import games

    return games.exploitability(games.rock_paper_scissors(strength), [1.0, 0.0, 0.0])


def check_pure_rock_exploitability(answer, strength: float = 0.9) -> str:
    """Exercise: how much does the best response beat a policy that always plays rock?"""
    expected = pure_rock_exploitability(strength)
    if not abs(float(answer) - expected) <= 1e-6:
        raise AssertionError(f"not quite: paper beats rock with probability ½ + strength/2 (strength {strength}); "
                             f"subtract the game's value ½ (you gave {answer})")
    return "correct"
