"""DCPO: steer the entropy by mixing a target-temperature importance weight into the GRPO advantage.

    rho_T,t = exp(log pi_old^(T)(y_t) - log pi_old(y_t))    the old logits re-scored at the target temperature T
    c_i     = [score_i > 0.05]                              correct samples
    a       = min(|H_0 - H|, 0.1) / p_correct,  alpha = a / (1 + a)
    A'_t    = (1 - alpha) A_GRPO + alpha c_i rho_T,t        then the usual clipped PPO loss ("double IS")

Two components, because only a stage with the step context can score the batch at T: `reward_shaping:dcpo` stores
log pi_old^(T) in `batch.temp_logp` (after the forward passes, on the final batch), and `advantage:dcpo`, after
`grpo` in the chain, combines it. The `dcpo` controller drives T into the first and H_0 - H into the second.

Reference: 597358816/DCPO `verl/trainer/ray_trainer.py` (branch `alg == "DCPO"`, L813-836;
`_compute_bool_reward_by_score` L188-197), transcribed in tests/anchors/formulas_dcpo.py.
"""
from __future__ import annotations

import math

import torch

from workbench import ops, registry
from workbench.advantages.base import check_rewards

DCPO_TITLE = "Distribution-Centric Policy Optimization Dominates Exploration-Exploitation Trade-off"


def correct_rows(scores: torch.Tensor, threshold: float = 0.05) -> torch.Tensor:
    """[B] bool: the verifier's score is above `threshold` (the reference's `bool_reward`, on token_level_scores)."""
    check_rewards(scores)
    return scores > threshold


def dcpo_alpha(entropy_gap: float, p_correct: float, *, cap: float = 0.1, reference_bug: bool = False) -> float:
    """alpha = a / (1 + a), a = min(|gap|, cap) / p_correct: in [0, 1), 0 when H = H_0, larger when few are correct.

    No correct sample (p_correct = 0): alpha = 0, since c_i rho is 0 on every row there is nothing to mix in and the
    GRPO advantage is kept. The reference divides by the zero tensor and gets alpha = NaN, hence NaN advantages for
    the whole batch; `reference_bug=True` reproduces that.
    """
    if not 0 <= p_correct <= 1:
        raise ValueError(f"p_correct must be a fraction in [0, 1], got {p_correct}")
    if not (math.isfinite(cap) and cap >= 0):
        raise ValueError(f"cap must be finite and >= 0, got {cap}")
    if not math.isfinite(entropy_gap):
        raise ValueError(f"entropy_gap must be finite, got {entropy_gap}")
    if p_correct == 0:
        return math.nan if reference_bug else 0.0
    a = min(abs(entropy_gap), cap) / p_correct
    return a / (1 + a)


def temperature_weight(temp_logp: torch.Tensor, old_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """rho_T [B, T] = pi_old^(T) / pi_old of each sampled token, 0 off the mask (no gradient: both are old)."""
    ops.check_mask(temp_logp, mask, "temp_logp")
    ops.check_mask(old_logp, mask, "old_logp")
    return torch.where(mask > 0, torch.exp(temp_logp.detach() - old_logp.detach()), torch.zeros_like(temp_logp))


def dcpo_mix(advantages: torch.Tensor, rho: torch.Tensor, correct: torch.Tensor, alpha: float) -> torch.Tensor:
    """A' [B, T] = (1 - alpha) A + alpha c rho (the reference's order of operations)."""
    return (1 - alpha) * advantages + alpha * correct.to(rho.dtype)[:, None] * rho


DCPO_LOGS = {
    "dcpo/rho_mean": ("DCPO: mean target-temperature weight pi_old^(T)(y_t) / pi_old(y_t) over the sampled tokens.",
                      "About 1 at any T, since E_{y ~ pi}[pi^T / pi] = 1; exactly 1 at T = 1. Far from 1: very few "
                      "tokens, or samples not drawn from pi_old."),
    "dcpo/correct_frac": ("DCPO: share of samples with score > 0.05 (p_correct), the denominator of alpha.",
                          "Equals accuracy for 0/1 scores. Near 0 pushes alpha towards 1 and fades the GRPO signal; "
                          "at 0 alpha is 0 here (the reference gives NaN)."),
}


@registry.reward_shaping(
    "dcpo", title=DCPO_TITLE,
    summary="Score the batch's responses with the old policy at the target temperature T (driven by the dcpo "
            "controller) into batch.temp_logp; rewards are unchanged.",
    equation=r"\log\pi_{old}^{(T)}(y_t) = \log\mathrm{softmax}(z_t / T)_{y_t}",
    provides=("temp_logp",), logs=DCPO_LOGS)
def dcpo_score(batch, ctx, *, temperature=1.0):
    """Reads the rollout's prompt/response ids and `scores`. `temperature` = 1.0 when nothing drives it (the
    reference's starting value; T = 1 gives rho = 1). T is absolute (logits / T); rho is taken against `old_logp`,
    which is at the run's temperature, 1.0 by default as the reference's old log-probs.
    Logs `dcpo/rho_mean` (mean rho over valid tokens) and `dcpo/correct_frac` (p_correct)."""
    if not (math.isfinite(temperature) and temperature > 0):
        raise ValueError(f"temperature must be finite and > 0, got {temperature}")
    batch.require("scores")
    batch.temp_logp = ctx.score(batch, temperature)
    if batch.old_logp is not None:
        rho = temperature_weight(batch.temp_logp, batch.old_logp, batch.mask)
        ctx.metrics["dcpo/rho_mean"] = float(ops.masked_mean(rho, batch.mask))
    ctx.metrics["dcpo/correct_frac"] = float(correct_rows(batch.scores).double().mean())
    return batch


@registry.advantage(
    "dcpo", title=DCPO_TITLE,
    summary="After grpo in the chain: A' = (1 - alpha) A + alpha [correct] pi_old^(T)/pi_old, alpha from the "
            "entropy gap |H_0 - H| (capped at 0.1) over the share of correct samples.",
    equation=r"A'_{i,t} = (1-\alpha)A_{i,t} + \alpha\,[R_i > 0.05]\,\frac{\pi_{old}^{(T)}(y_t)}{\pi_{old}(y_t)},\ "
             r"\alpha = \frac{a}{1+a},\ a = \frac{\min(|H_0 - H|, 0.1)}{p_{correct}}",
    reads=("advantages", "temp_logp", "old_logp", "scores"))
def dcpo(batch, *, entropy_gap=0.0, cap=0.1, threshold=0.05, reference_bug=False):
    """Reads `advantages` (the GRPO entry before it), `temp_logp` (reward_shaping:dcpo), `old_logp`, `scores`, `mask`.

    entropy_gap = H_0 - H, driven by the dcpo controller (0 when undriven: alpha = 0, plain GRPO). cap = 0.1 and
    threshold = 0.05 are the reference's constants (`min(alpha, 0.1)`, `_compute_bool_reward_by_score(threshold=0.05)`).
    p_correct = the share of the batch's rows with score > threshold (the reference's `bool_reward.sum() / len(batch)`;
    confirmed in the code: rows, not tokens, over the whole step batch). Off the mask A' = 0.
    """
    batch.require("advantages", "temp_logp", "old_logp", "scores")
    correct = correct_rows(batch.scores, threshold)
    alpha = dcpo_alpha(entropy_gap, float(correct.double().mean()), cap=cap, reference_bug=reference_bug)
    rho = temperature_weight(batch.temp_logp, batch.old_logp, batch.mask)
    return dcpo_mix(batch.advantages, rho, correct, alpha) * batch.mask
