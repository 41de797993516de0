"""EPO: entropy bonus with a historical-band smoothing penalty and a phase weight (multi-turn agents).

    L = L_PG - c_H (agg(H_t) - c_s agg(w P_t))
    P_t = out_range_penalty (relu(low Hbar_k - H_t) + relu(H_t - high Hbar_k))    token mode, k = turn of t
    Hbar_k = mean token entropy of environment-turn index k over past steps (controller `epo`)
    P_t = 0 on turns k < max_steps // 2 and on turns the history has not seen yet
    w = phase weight (schedule `epo`): 1 - 0.2 (1 - e^{-2p}) in the first half of training, 0.8 e^{-3p} in the second

The historical entropies come from the controller `epo` (workbench/controllers/epo.py), which drives `history`;
the phase weight is the schedule `epo` below, which drives `phase_weight`.

Reference: WujiangXu/EPO `verl/workers/actor/dp_actor.py` (`generate_entropy_penalty`,
`_calculate_epoch_based_entropy_weight`, the loss in `update_policy`), commit 5b6fa98e.
"""
from __future__ import annotations

import math

import torch

from workbench import ops, registry
from workbench.regularizers.entropy import entropy_bonus

EPO_TITLE = "EPO: Entropy-regularized Policy Optimization for LLM Agents Reinforcement Learning"
MODES = ("token", "seq")


# ------------------------------------------------------------------------------------------------ phase weight

def phase_weight(step: int, total: int) -> float:
    """EPO's `_calculate_epoch_based_entropy_weight(current_epoch=step, max_epochs=total)`, transcribed: half =
    total // 2; first half w = 1 - 0.2 (1 - exp(-2 p)), p = step / half (1 -> 0.83); second half
    w = 0.8 exp(-3 p), p = (step - half) / (total - half) (0.8 -> 0.04). Non-increasing in step."""
    if total <= 0:
        return 1.0
    step = max(0, min(step, total))
    half = total // 2
    if step <= half:
        return 1.0 if half == 0 else 1.0 - 0.2 * (1 - math.exp(-2.0 * step / half))
    return 0.8 * math.exp(-3.0 * (step - half) / (total - half))


@registry.schedule(
    "epo", title=EPO_TITLE,
    summary="EPO's phase weight on the smoothing penalty: slow decay 1 -> 0.83 over the first half of training, "
            "fast decay 0.8 -> 0.04 over the second (drives regularizer:epo.phase_weight).",
    equation=r"w(p) = \begin{cases} 1 - 0.2\,(1 - e^{-2p}) & \text{first half} \\ 0.8\,e^{-3p} & \text{second half}"
             r"\end{cases}")
def epo_phase_weight(step, total, *, max_epochs=None):
    """`phase_weight(step, max_epochs)`. The reference counts trainer epochs against a hard-coded E = 150 (its
    scripts run 125 to 150 epochs, about the whole run). Our reading: progress is step / total, so max_epochs=None
    uses the run's total steps; an integer reproduces a fixed horizon."""
    horizon = total if max_epochs is None else max_epochs
    if horizon is None or int(horizon) < 0:
        raise ValueError(f"max_epochs must be None or a non-negative integer, got {max_epochs}")
    return phase_weight(int(step), int(horizon))


# ------------------------------------------------------------------------------------------------ the penalty

def history_per_token(history, turn: torch.Tensor, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(Hbar [B, T], known [B, T] bool): the historical entropy of each token's turn index, and whether the history
    has that index (padding turn -1, turns past the history and NaN entries are unknown)."""
    hist = torch.as_tensor([float(h) for h in history], dtype=dtype, device=turn.device)
    if hist.numel() == 0:
        return (torch.zeros(turn.shape, dtype=dtype, device=turn.device),
                torch.zeros(turn.shape, dtype=torch.bool, device=turn.device))
    hbar = hist[turn.long().clamp(0, hist.numel() - 1)]
    known = (turn >= 0) & (turn < hist.numel()) & ~torch.isnan(hbar)
    return torch.nan_to_num(hbar), known


def turn_means(x: torch.Tensor, mask: torch.Tensor, turn: torch.Tensor) -> torch.Tensor:
    """Each token's (row, turn) masked mean of x, broadcast back to [B, T] (0 where the action has no valid token)."""
    B = mask.shape[0]
    n_turns = int(turn.max().clamp(min=0)) + 1
    key = (torch.arange(B, device=mask.device)[:, None] * n_turns + turn.long().clamp(min=0)).flatten()
    sums = torch.zeros(B * n_turns, dtype=x.dtype, device=mask.device).index_add(0, key, (x * mask).flatten())
    counts = torch.zeros(B * n_turns, dtype=mask.dtype, device=mask.device).index_add(0, key, mask.flatten())
    return (sums / counts.clamp(min=1))[key].view(mask.shape)


def band_penalty(entropy, hbar, *, low, high, out_range_penalty, reference_bug=False):
    """P [B, T] of entropies against the band [low Hbar, high Hbar].

    Default (differentiable): out_range_penalty (relu(low Hbar - H) + relu(H - high Hbar)), whose gradient pushes H
    back toward the band and is 0 inside it. reference_bug=True: EPO's `torch.where(low Hbar < H < high Hbar, 0,
    out_range_penalty)`, a constant (no gradient) that only shifts the loss value."""
    lower, upper = low * hbar, high * hbar
    if reference_bug:
        within = (entropy > lower) & (entropy < upper)
        return torch.where(within, torch.zeros_like(entropy), torch.full_like(entropy, out_range_penalty)).detach()
    return out_range_penalty * (torch.relu(lower - entropy) + torch.relu(entropy - upper))


def epo_penalty(entropy, mask, turn, history, *, low=0.8, high=1.2, out_range_penalty=0.1, max_steps=50,
                mode="token", reference_bug=False) -> tuple[torch.Tensor, torch.Tensor]:
    """(P [B, T], gated [B, T] bool): the smoothing penalty on the tokens it applies to (turn index >= max_steps // 2
    with a known history), 0 elsewhere. `mode="seq"` compares each action's (row, turn) mean entropy with the band
    and spreads its P over the action's tokens. (The reference's rows are single turns compared by `entropy.mean(-1)`,
    a mean over the padding too; our rows hold whole episodes, so that quirk has no counterpart and is not
    reproduced: the action's masked mean is used with or without reference_bug.)"""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if turn is None:  # a rollout without turn ids: one turn per response
        turn = torch.where(mask > 0, 0, -1)
    if turn.shape != mask.shape:
        raise ValueError(f"turn has shape {tuple(turn.shape)} but mask has shape {tuple(mask.shape)}")
    hbar, known = history_per_token(history, turn, entropy.dtype)
    gated = known & (turn >= max_steps // 2) & (mask > 0)
    h = turn_means(entropy, mask, turn) if mode == "seq" else entropy
    p = band_penalty(h, hbar, low=low, high=high, out_range_penalty=out_range_penalty, reference_bug=reference_bug)
    return p * gated.to(p.dtype), gated


def check_epo(coef, smooth_coef, history, low, high, out_range_penalty, max_steps, phase_weight):
    if coef < 0 or smooth_coef < 0:
        raise ValueError(f"coef and smooth_coef must be >= 0, got coef={coef}, smooth_coef={smooth_coef}")
    if not 0 <= low <= high:
        raise ValueError(f"need 0 <= low <= high for the entropy band, got low={low}, high={high}")
    if out_range_penalty < 0:
        raise ValueError(f"out_range_penalty must be >= 0, got {out_range_penalty}")
    if int(max_steps) != max_steps or max_steps < 0:
        raise ValueError(f"max_steps must be a non-negative integer, got {max_steps}")
    if not 0 <= phase_weight <= 1:
        raise ValueError(f"phase_weight must be in [0, 1], got {phase_weight}")
    if any(math.isinf(float(h)) or float(h) < 0 for h in history):
        raise ValueError(f"history must hold entropies >= 0 (NaN: turn not seen yet), got {list(history)}")


EPO_LOGS = {
    "epo/penalty": ("EPO: aggregated smoothing penalty w P over tokens whose entropy leaves the band around the "
                    "historical entropy of their turn index (before the c_H c_s factor).",
                    "0 while every gated token is inside the band (always at step 0: no history yet); small and "
                    "spiky otherwise. Growing steadily: entropy drifts away from its history (collapse or blow-up)."),
    "epo/in_band_frac": ("EPO: share of the gated tokens (late turns with a history) whose entropy is inside the band "
                         "(the reference's entropy_mask_ratio); 1 when no token is gated.",
                         "Near 1 with the README band [0, 2] x history; 0.8 / 1.2 leaves most tokens outside (token "
                         "entropies spread far more than 20%). Falling: entropy leaving its historical range."),
    "epo/phase_weight": ("EPO: phase weight w on the smoothing penalty this step (1 -> 0.83 over the first half of "
                         "training, 0.8 -> 0.04 over the second).",
                         "Fixed by the schedule: non-increasing, about 0.83 at mid-run, under 0.05 at the end."),
}


@registry.regularizer(
    "epo", title=EPO_TITLE,
    summary="Entropy bonus c_H agg(H) minus c_H c_s agg(w P): tokens whose entropy leaves the band "
            "[low, high] x (historical mean entropy of their turn index) are penalized, on late turns only.",
    equation=r"L \mathrel{-}= c_H\big(\mathrm{agg}(H_t) - c_s\,\mathrm{agg}(w\,P_t)\big),\ "
             r"P_t = \rho\big([\kappa_l\bar H_k - H_t]_+ + [H_t - \kappa_r\bar H_k]_+\big)",
    reads=("entropy", "turn"), logs=EPO_LOGS, choices={"mode": MODES})
def epo(forward, batch, *, agg="token-mean", denom=None, coef=0.001, smooth_coef=1.0, history=(), low=0.8,
        high=1.2, out_range_penalty=0.1, max_steps=50, mode="token", phase_weight=1.0, reference_bug=False):
    """EPO's entropy term on the training forward's entropy [B, T] (with gradient).

    Defaults from `verl/trainer/config/ppo_trainer.yaml`: entropy_coeff c_H 0.001, entropy_smooth_coeff c_s 1.0,
    band 0.8 / 1.2 (`examples/general_running_server.sh`: 0.5 / 1.5; the README's runs: 0 / 2.0),
    out_range_penalty 0.1 (ALFWorld; ScienceWorld 0.05), max_steps 50, mask mode "token". `phase_weight` 1.0 is
    `enable_smooth_weights: False`; the schedule `epo` drives it (README runs turn it on). `history` [K] is driven
    by the controller `epo` (NaN: a turn index not seen yet); a turn without history gets no penalty.

    Our reading: the catalog's differentiable penalty is the default (`band_penalty`); reference_bug=True
    reproduces the code's constant mask, which has no gradient. The reference applies the penalty to a whole
    micro-batch as soon as any of its rows (one row = one turn there) has turn index >= max_steps // 2; here a
    row is an episode, so the gate is per token (turn index >= max_steps // 2) in both modes. The reference reads
    `max_step` (not the configured `max_steps`), so its threshold is always 25: the default 50 reproduces that.
    Metrics: `epo/penalty` (agg of w P), `epo/in_band_frac` (gated tokens inside the band; the reference's
    `entropy_mask_ratio`), `epo/phase_weight`.
    """
    check_epo(coef, smooth_coef, history, low, high, out_range_penalty, max_steps, phase_weight)
    entropy, mask = forward.entropy, batch.mask
    p, gated = epo_penalty(entropy, mask, batch.turn, history, low=low, high=high,
                           out_range_penalty=out_range_penalty, max_steps=max_steps, mode=mode,
                           reference_bug=reference_bug)
    smoothing = ops.aggregate(phase_weight * p, mask, agg, denom)       # agg(w P)
    loss = entropy_bonus(entropy, mask, coef=coef, agg=agg, denom=denom) + coef * smooth_coef * smoothing
    with torch.no_grad():
        in_band = gated & (p == 0)
        frac = float(in_band.sum()) / float(gated.sum()) if gated.any() else 1.0
    return loss, {"epo/penalty": smoothing.item(), "epo/in_band_frac": frac, "epo/phase_weight": float(phase_weight)}
