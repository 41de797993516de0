"""Rollout-trainer mismatch correction: truncated / masked importance sampling (TIS, MIS).

    w_t = exp(old_t - mu_t)                  trainer pi_old over rollout-engine mu, per token
    W_i = exp(sum_t m (old - mu))            per sequence, broadcast over its tokens
    token_truncate / sequence_truncate:      w <- min(w, C)
    token_mask / sequence_mask:              w <- w [low <= w <= C]   (low=None: no lower bound)
    l_t = sg(w_t) * l_t^{PPO-clip}
"""
from __future__ import annotations

import torch

from dataclasses import replace

from workbench import ops, registry
from workbench.objectives.ppo import CLIP_LOGS, DUAL_CLIP_LOGS, check_inputs, ppo_clip

TIS_MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")


def check_tis(*, mode="token_truncate", cap=2.0, low=None, **_) -> None:
    if mode not in TIS_MODES:
        raise ValueError(f"unknown TIS mode {mode!r}; choose one of {TIS_MODES}")
    if not cap > 0:
        raise ValueError(f"cap must be > 0, got {cap}")
    if low is not None:
        if mode.endswith("_truncate"):
            raise ValueError(f"low={low} only applies to the mask modes (token_mask, sequence_mask), not {mode!r}")
        if not 0 <= low < cap:
            raise ValueError(f"need 0 <= low < cap, got low={low}, cap={cap}")


def tis_weights_and_drops(old_logp, mu_logp, mask, *, mode="token_truncate", cap=2.0, low=None):
    """(w, dropped): `tis_weights` [B, T] and where a mask mode dropped a valid token [B, T] bool."""
    check_tis(mode=mode, cap=cap, low=low)
    if old_logp.shape != mu_logp.shape:
        raise ValueError(f"mu_logp has shape {tuple(mu_logp.shape)} but old_logp has shape {tuple(old_logp.shape)}")
    ops.check_mask(old_logp, mask, "old_logp")
    truncate = mode.endswith("_truncate")
    with torch.no_grad():
        logw = old_logp.detach() - mu_logp.detach()
        if mode.startswith("sequence"):
            logw = ops.masked_sum(logw, mask, -1)[:, None].expand_as(logw)
        raw = torch.exp(logw)  # may overflow to inf for long sequences; min / comparisons handle it
        valid = mask > 0
        if truncate:
            w, dropped = raw.clamp(max=cap), torch.zeros_like(valid)
        else:
            keep = raw <= cap
            if low is not None:
                keep = keep & (raw >= low)
            w, dropped = torch.where(keep, raw, torch.zeros_like(raw)), valid & ~keep
        w = torch.where(valid, w, torch.zeros_like(w))
    return w, dropped


def tis_weights(old_logp, mu_logp, mask, *, mode="token_truncate", cap=2.0, low=None) -> torch.Tensor:
    """Detached importance weights [B, T] correcting rollout-engine sampling (mu) to the trainer (old).

    token_truncate: min(exp(old - mu), cap)        (TIS; DART uses cap = 1)
    token_mask:     exp(old - mu) [low <= w <= cap] (MIS; low = 1/cap two-sided, IcePop band [alpha, beta])
    sequence_*:     the same on W_i = exp(sum_t m (old - mu)), broadcast over the sequence's tokens
    Tokens outside `mask` get weight 0. `low` is only meaningful (and only accepted) for the mask modes.
    """
    return tis_weights_and_drops(old_logp, mu_logp, mask, mode=mode, cap=cap, low=low)[0]


# What `correction_metrics` logs beside the weights (TIS, rollout-is; HiSPO and MiniRL log their own mismatch).
MISMATCH_LOGS = {
    "mismatch/abs_logp_diff_max": ("TIS, MiniRL: largest |old_logp - mu_logp| over a minibatch's tokens (averaged "
                                   "over optimizer steps): rollout-engine vs trainer log-prob mismatch.",
                                   "Around 1e-6 with HF generate (float rounding; 5e-7 to 6e-6 on the smoke runs). "
                                   "Orders of magnitude larger: a separate engine (vLLM, bf16) or stale engine "
                                   "weights."),
}


TIS_LOGS = {
    "tis/mean_weight": ("TIS: mean truncated/masked importance weight exp(old - mu) applied to the loss.",
                        "1 to within about 1e-6 with HF generate (mu equals old up to rounding). Below 1 in the mask "
                        "modes by the dropped share; far from 1: engine and trainer disagree (vLLM dtype, stale "
                        "weights)."),
    "tis/masked_frac": ("TIS: fraction of valid tokens whose weight was masked to 0.",
                        "Always 0 in the truncate modes, and 0 with HF generate in any mode. With vLLM it should "
                        "stay small; high: much of the batch is dropped because engine and trainer log-probs "
                        "disagree."),
}


@registry.objective(
    "tis", title="Your Efficient RL Framework Secretly Brings You Off-Policy RL Training",
    summary="PPO-clip per-token loss times a truncated / masked IS weight exp(old - mu) correcting the "
            "rollout-engine vs trainer mismatch (token or sequence level).",
    equation=r"\ell_{i,t} = \mathrm{sg}(w_{i,t})\,\ell^{\mathrm{PPO}}_{i,t},\quad "
             r"w_{i,t} = \min\big(e^{\log\pi_{old} - \log\mu}, C\big)\ \text{or}\ "
             r"e^{\log\pi_{old} - \log\mu}\,[w \le C]",
    reads=("mu_logp",), logs={**CLIP_LOGS, **DUAL_CLIP_LOGS, **MISMATCH_LOGS, **TIS_LOGS}, choices={"mode": TIS_MODES},
    check=check_tis)
def tis(logp, old_logp, advantages, mask, *, mu_logp, agg="token-mean", denom=None, mode="token_truncate",
        cap=2.0, low=None, eps_low=0.2, eps_high=0.2, dual_clip_c=None, logr_clamp=None):
    r"""PPO-clip with the rollout-mismatch weight: l_t = sg(w_t) l_t^PPO, w = `tis_weights(old, mu, mask)`.

    `mu_logp` (rollout-engine log-probs, [B, T]) is a required keyword: the objective signature has no
    mu slot. mu and old are detached (the weight carries no gradient, and neither does the ratio's old).
    mu = old gives w = 1 and exactly the `ppo-clip` loss. Tokens / sequences dropped by a mask mode have
    zero loss and zero gradient; they still count in the aggregation denominator (as TRL/verl do).
    Defaults: mode token_truncate, cap 2.0 (the anchors differ: TRL sequence_mask with cap 3.0, DART token
    truncation with cap 1, verl rollout_is threshold 2.0); PPO-clip hyper-parameters as `ppo-clip`.
    Metrics: PPO clip fractions, `tis/mean_weight` (mean w over valid tokens), `tis/masked_frac` (fraction
    of valid tokens dropped), `mismatch/abs_logp_diff_max` = max |old - mu| over valid tokens.
    """
    check_inputs(logp, old_logp, advantages, mask)
    if mu_logp.shape != logp.shape:
        raise ValueError(f"mu_logp has shape {tuple(mu_logp.shape)} but logp has shape {tuple(logp.shape)}")
    w, dropped = tis_weights_and_drops(old_logp.detach(), mu_logp.detach(), mask, mode=mode, cap=cap, low=low)
    loss, metrics = ppo_clip(logp, old_logp.detach(), advantages, mask, agg=agg,
                             denom=with_weights(denom, mask, w), eps_low=eps_low, eps_high=eps_high,
                             dual_clip_c=dual_clip_c, logr_clamp=logr_clamp)
    metrics.update(correction_metrics(w, dropped, old_logp, mu_logp, mask, prefix="tis"))
    return loss, metrics


def with_weights(denom: ops.Denominators | None, mask, w) -> ops.Denominators:
    """`denom` (own counts of `mask` when None) carrying per-token loss weights w [B, T] (times any it had)."""
    denom = denom if denom is not None else ops.Denominators.of(mask)
    return replace(denom, weights=w if denom.weights is None else denom.weights * w)


def correction_metrics(w, dropped, old_logp, mu_logp, mask, *, prefix: str) -> dict[str, float]:
    """`<prefix>/mean_weight` (mean w over valid tokens), `<prefix>/masked_frac` (valid tokens a mask mode
    dropped), `mismatch/abs_logp_diff_max` (max |old - mu| over valid tokens)."""
    with torch.no_grad():
        return {f"{prefix}/mean_weight": float(ops.masked_mean(w, mask)),
                f"{prefix}/masked_frac": float(ops.masked_mean(dropped.to(mask.dtype), mask)),
                "mismatch/abs_logp_diff_max": float(((old_logp.detach() - mu_logp.detach()).abs() * mask).max())}
