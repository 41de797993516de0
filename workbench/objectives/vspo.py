"""VSPO's value-smoothing clip: PPO-clip whose band is scaled by the task value of the sample's prompt.

    v_i        = p(x_i)(1 - p(x_i)) in [0, 1/4]           from the `vspo` group transform (batch.task_value)
    s_i        = 1 - lam + lam v_i / (1/4)                in [1 - lam, 1]
    l_t        = -min(r_t A_t, clip(r_t, 1 - s_i eps_low, 1 + s_i eps_high) A_t)

lam = 0 is PPO-clip; prompts of full value (p = 1/2) keep the whole band, prompts the policy almost always or
almost never solves get a band narrowed towards (1 - lam) eps.
"""
from __future__ import annotations

import torch

from workbench import ops, registry
from workbench.objectives.ppo import CLIP_LOGS, DUAL_CLIP_LOGS, check_inputs, clip_metrics, ppo_clip_per_token

VSPO_TITLE = "Enhancing Agentic RL with Progressive Reward Shaping and Value-based Sampling Policy Optimization"
V_MAX = 0.25  # max of p (1 - p), at p = 1/2


def task_value(p):
    """v = p (1 - p): the Bernoulli variance of a prompt's outcome at pass rate p (0 for always / never solved)."""
    return p * (1 - p)


def check_vspo(*, value_smoothing=0.5, **_) -> None:
    if not 0 <= value_smoothing <= 1:
        raise ValueError(f"value_smoothing must be in [0, 1] (0: plain ppo-clip), got {value_smoothing}")


def clip_scale(task_value: torch.Tensor, *, value_smoothing) -> torch.Tensor:
    """s [B] = 1 - lam + lam v / v_max: the factor on both clip bounds of each sequence."""
    check_vspo(value_smoothing=value_smoothing)
    v = task_value.detach()
    if bool(((v < 0) | (v > V_MAX + 1e-12) | ~torch.isfinite(v)).any()):
        raise ValueError(f"task_value must lie in [0, 1/4] (p (1 - p)); got values in [{float(v.min())}, "
                         f"{float(v.max())}]")
    return 1 - value_smoothing + value_smoothing * v / V_MAX


VSPO_CLIP_LOGS = {
    "vspo/clip_scale_mean": ("VSPO: mean factor 1 - lam + 4 lam v on the clip bounds (1 = plain PPO-clip band).",
                             "Between 1 - value_smoothing and 1 (0.5 to 1 by default), tracking "
                             "vspo/task_value_mean; near 1 - value_smoothing: the clip band is narrow on most "
                             "samples."),
}


@registry.objective(
    "vspo", title=VSPO_TITLE,
    summary="Value-smoothing clip: PPO-clip whose bounds are scaled by 1 - lam + 4 lam v(x), v = p(1 - p) the task "
            "value of the sample's prompt (from the vspo group transform); lam = 0 is ppo-clip.",
    equation=r"\ell_{i,t} = -\min\big(r A,\ \mathrm{clip}(r, 1 - s_i\epsilon_{low}, 1 + s_i\epsilon_{high})A\big),\ "
             r"s_i = 1 - \lambda + 4\lambda\,v(x_i)",
    reads=("task_value",), logs={**CLIP_LOGS, **DUAL_CLIP_LOGS, **VSPO_CLIP_LOGS}, check=check_vspo)
def vspo(logp, old_logp, advantages, mask, *, task_value, agg="token-mean", denom=None, eps_low=0.2, eps_high=0.2,
         value_smoothing=0.5, dual_clip_c=None, logr_clamp=None):
    r"""VSPO's policy half (arXiv 2512.07478): the abstract says VSPO "applies value-smoothing clipping to
    stabilize gradient updates"; no formula or code could be read (`abstract-only`), so this is a stated reading,
    not the paper's form.

    Our reading: the clip band of each sequence is smoothed by its prompt's task value v = p(1 - p) (the quantity
    VSPO already computes to pick prompts): eps_i = s_i eps with s_i = 1 - lam + lam v_i / (1/4). A prompt of
    full value (p = 1/2, the most informative) keeps the full trust region; one the policy nearly always or nearly
    never solves, whose rare informative group is the noisiest estimate, moves the policy less
    (band (1 - lam) eps at v = 0). `task_value` [B] comes from the `vspo` group transform (smoothed pass rates).
    Defaults: eps 0.2 / 0.2 (GRPO's clip: VSPO is "an enhanced GRPO variant"), lam = value_smoothing = 0.5
    (`unverified`); dual_clip_c and logr_clamp off, as `ppo-clip`. value_smoothing = 0, or v = 1/4, give exactly
    `ppo-clip`.
    Gradient per token: PPO's, -r A ∇logp inside the sequence's band and 0 past it in A's direction.
    Metrics: PPO clip fractions with each sequence's own bounds, `vspo/clip_scale_mean` (mean s over valid tokens).
    """
    check_inputs(logp, old_logp, advantages, mask)
    if task_value.shape != logp.shape[:1]:
        raise ValueError(f"task_value must have shape [B]={logp.shape[0]}, got {tuple(task_value.shape)}")
    if not (eps_low >= 0 and eps_high >= 0):
        raise ValueError(f"eps_low and eps_high must be >= 0, got {eps_low}, {eps_high}")
    scale = clip_scale(task_value, value_smoothing=value_smoothing).to(logp.dtype)[:, None]  # [B, 1]
    low, high = eps_low * scale, eps_high * scale
    per_token, r, dual = ppo_clip_per_token(logp, old_logp.detach(), advantages, eps_low=low, eps_high=high,
                                            dual_clip_c=dual_clip_c, logr_clamp=logr_clamp)
    loss = ops.aggregate(per_token, mask, agg, denom)
    metrics = clip_metrics(r.detach(), advantages, mask, low, high, dual)
    metrics["vspo/clip_scale_mean"] = float(ops.masked_mean(scale.expand_as(mask), mask))
    return loss, metrics
