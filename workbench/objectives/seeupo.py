"""SeeUPO: the turns of an episode updated one at a time, last turn first, each on its turn-level (sequence) ratio,
its advantage corrected by the ratios of the turns already updated.

    s_{i,k}   = exp((1/|a_ik|) sum_{t in a_ik} (logp_t - old_t))           turn ratio (GSPO's, over turn k's tokens)
    M_{i,k}   = prod_{k' > k} sg(s_{i,k'})                                 correction by the later turns (1 if none)
    l_t       = -min(s_t M A_t, clip(s_t, 1 - eps_low, 1 + eps_high) M A_t) token form of s_{i,k}, t in a_ik
    L_k       = (1/B) sum_i (1/|a_ik|) sum_{t in a_ik} l_t                 turn k's samples (seq-mean-token-mean)
    L         = sum_k L_k
    schedule  (`turn_plan`): for k = K-1, ..., 0 one optimizer step on L, gradient through turn k's tokens only

The schedule is the registry entry's `plan`: the trainer (`workbench.train.trainer.Trainer.train_on`) takes one optimizer
step per mask of `turn_plan`, in order, in every epoch and minibatch; each step's forward gives the current log-probs
of every turn, so M_{i,k} for the turn being updated reads the later turns' movement since the rollout, s_{k'}(theta
now) / s_{k'}(theta_old) (old_logp is the sampling policy: s_{k'}(theta_old) = 1). Before any later turn has moved,
M = 1. A one-turn episode is sequence-level PPO (GSPO) with the GRAE advantage: at theta_old, the sequence-level
REINFORCE gradient -(1/B) sum_i A_i (1/|y_i|) sum_t ∇logp_t.

Reading (`abstract-only`, arXiv 2602.06554: multi-turn episodes as sequentially executed multi-agent bandits, updated
turn by turn in reverse execution order with turn-level ratios, monotonic improvement by backward induction). The
correction M_k is the sequential-update importance weight of heterogeneous-agent trust-region methods (HAPPO); it is
computed within the batch, no re-rollout between turn updates (the catalog's default). order="forward" updates the
first turn first, order="simultaneous" takes one step on all turns (the baseline the paper argues against).

Authors' code: modelscope/AgentEvolver, branch `seeupo` @ e59dea4 `beyondagent/module/trainer/ba_ray_trainer.py`:
`update_ratios` (after turn k' is updated: s = exp(clamp(mean log-ratio, -10, 10)) clipped to [1 - 0.2, 1 + 0.2], the
running product multiplied by it and clipped again to the same band), `compute_advantage(..., ratios=)` (advantages x
sg(ratios)), the fit loop (`update_order: reverse`, one full actor update per turn, GSPO loss, seq-mean-token-mean,
`adv_clip_ratio_low/high: 0.2`), `launcher/qwen3_appworld/qwen3-seeupo-appworld.yaml`. correction="code" reproduces
`update_ratios` (transcribed in tests/anchors/formulas_seeupo.py). Two differences of the code's loop remain: it
measures turn k' right after its own update, s_{k'}(theta after k') / s_{k'}(theta before k'), where this reads it at
the current theta (equal when the turns' parameters are separate, as in the tabular test); and it re-computes old_logp
before each turn's update (each turn's clip is centred there), where this keeps the rollout's.
"""
from __future__ import annotations

import torch

from workbench import ops, registry
from workbench.advantages.ipa import chunk_ids, chunk_table, gather_chunks
from workbench.advantages.seeupo import SEEUPO_TITLE
from workbench.objectives.ipa import chunk_clip_loss
from workbench.objectives.ppo import CLIP_LOGS, check_inputs, clip_metrics

ORDERS = ("reverse", "forward", "simultaneous")
CORRECTIONS = ("is", "code", "none")


def turn_log_ratios(logp, old_logp, mask, ids):
    """([B, K] log s_{i,k}, detached, 0 for an absent turn; [B, K] bool turn k present in row i)."""
    sums, counts = chunk_table((logp - old_logp).detach(), mask, ids)
    return sums / counts.clamp(min=1), counts > 0


def later_turn_correction(log_s: torch.Tensor, *, correction="is", clip_low=0.2, clip_high=0.2,
                          logr_clamp=10.0) -> torch.Tensor:
    """[B, K] M_{i,k} from the turn log-ratios [B, K] (0 for absent turns, a factor of 1).

    "is": prod_{k' > k} s_{i,k'}; "none": 1; "code" (AgentEvolver `update_ratios`, applied from the last turn down):
    M_{K-1} = 1, M_k = clip(M_{k+1} clip(exp(clamp(log s_{k+1}, +-logr_clamp)), lo, hi), lo, hi),
    lo = 1 - clip_low, hi = 1 + clip_high."""
    if correction == "none":
        return torch.ones_like(log_s)
    if correction == "is":
        inclusive = log_s.flip(-1).cumsum(-1).flip(-1)
        return torch.exp(inclusive - log_s)
    if correction != "code":
        raise ValueError(f"correction must be one of {CORRECTIONS}, got {correction!r}")
    lo, hi = 1 - clip_low, 1 + clip_high
    out = torch.ones_like(log_s)
    for k in reversed(range(log_s.shape[1] - 1)):
        factor = torch.exp(log_s[:, k + 1].clamp(-logr_clamp, logr_clamp)).clamp(lo, hi)
        out[:, k] = (out[:, k + 1] * factor).clamp(lo, hi)
    return out


def turn_plan(batch, *, order="reverse", turns=None, **_) -> list[torch.Tensor]:
    """The update schedule: [B, T] masks of the tokens each optimizer step moves, in order.

    reverse: turn K-1, ..., turn 0; forward: turn 0, ..., K-1; simultaneous: one mask, every policy token. K is the
    batch's number of turns, or `turns` (fix it under data parallelism, so every rank takes the same steps)."""
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    batch.require("turn")
    ids = chunk_ids(batch.mask, batch.turn, "turn")
    seen = int(ids.max()) + 1
    if turns is not None and seen > turns:
        raise ValueError(f"seeupo: the batch has {seen} turns but turns={turns}; raise turns to the env's max_turns")
    K = turns or max(seen, 1)
    if order == "simultaneous":
        return [(batch.mask > 0).to(batch.mask.dtype)]
    steps = reversed(range(K)) if order == "reverse" else range(K)
    return [(ids == k).to(batch.mask.dtype) for k in steps]


def turn_sample_mean(per_token, mask, ids, denom: ops.Denominators | None = None) -> torch.Tensor:
    """sum_k (1/B) sum_i (1/|a_ik|) sum_{t in a_ik} l_t: every (row, turn) a sample of its turn's batch, B rows."""
    ops.check_mask(per_token, mask, "per-token loss")
    sums, counts = chunk_table(ops.weighted(per_token, denom), mask, ids)
    per_row = (sums / counts.clamp(min=1)).sum(-1)
    rows = denom.num_seqs if denom is not None and denom.num_seqs is not None else (mask.sum(-1) > 0).sum()
    return per_row.sum() / rows


def correction_metrics(M_tok, mask) -> dict[str, float]:
    valid = mask > 0
    return {"seeupo/correction_mean": float(ops.masked_mean(M_tok, mask)),
            "seeupo/correction_min": float(M_tok[valid].min()), "seeupo/correction_max": float(M_tok[valid].max())}


SEEUPO_LOGS = {
    "seeupo/correction_mean": ("SeeUPO: mean over policy tokens of M = the stopped product of the later turns' ratios "
                               "that multiplies a turn's advantage (1 for the last turn).",
                               "Within a few percent of 1: the turns updated earlier in the batch moved little. Far "
                               "from 1: later turns moved a lot, the earlier turns' advantages are heavily "
                               "reweighted."),
    "seeupo/correction_min": ("SeeUPO: smallest correction M on a policy token.",
                              "Above about 0.8 (correction='code' floors it at 0.8). Near 0: a later turn's ratio "
                              "collapsed, its earlier turns get almost no signal."),
    "seeupo/correction_max": ("SeeUPO: largest correction M on a policy token.",
                              "Below about 1.2 to 1.5 (correction='code' caps it at 1.2). Large: a later turn's "
                              "ratio blew up, the earlier turns' steps are inflated."),
}


@registry.objective(
    "seeupo", title=SEEUPO_TITLE,
    summary="Turn-level (sequence) ratio PPO, one optimizer step per turn in reverse order (the entry's plan), each "
            "turn's advantage times the stopped ratios of the turns already updated.",
    equation=r"\ell_t = -\min\big(s_{i,k}M_{i,k}A_i,\ \mathrm{clip}(s_{i,k})M_{i,k}A_i\big),\ "
             r"M_{i,k} = \prod_{k'>k}\mathrm{sg}\big(s_{i,k'}\big),\ k = K{-}1,\dots,0",
    reads=("turn",), needs=("multi_turn",), plan=turn_plan, logs={**CLIP_LOGS, **SEEUPO_LOGS},
    choices={"order": ORDERS, "correction": CORRECTIONS})
def seeupo(logp, old_logp, advantages, mask, *, turn=None, agg="seq-mean-token-mean", denom=None, eps_low=0.2,
           eps_high=0.2, order="reverse", turns=None, correction="is", correction_clip_low=0.2,
           correction_clip_high=0.2, logr_clamp=None):
    """SeeUPO's loss over all turns (L = sum_k L_k); the plan `turn_plan(order, turns)` decides which turn each
    optimizer step moves. Without `turn` a row is one turn.

    correction: "is" (default, M = prod of the later turns' stopped ratios), "code" (AgentEvolver `update_ratios`,
    band [1 - correction_clip_low, 1 + correction_clip_high] = adv_clip_ratio_low/high 0.2, log-ratio clamped to
    +-10), "none" (M = 1). eps_low = eps_high = 0.2: unverified (the launcher sets no clip_ratio; verl's default
    0.2). `agg` must be 'seq-mean-token-mean' (the launcher's loss_agg_mode, per turn sample).
    Metrics: clip fractions of the turn ratios over tokens; `seeupo/correction_mean|min|max` of M over tokens.
    """
    if agg != "seq-mean-token-mean":
        raise ValueError(f"seeupo averages each turn's tokens, then its rows (AgentEvolver's seq-mean-token-mean per "
                         f"turn sample); leave agg='seq-mean-token-mean', got {agg!r}")
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    check_inputs(logp, old_logp, advantages, mask)
    ids = chunk_ids(mask, turn, "turn")
    log_s, _ = turn_log_ratios(logp, old_logp, mask, ids)
    M = later_turn_correction(log_s, correction=correction, clip_low=correction_clip_low,
                              clip_high=correction_clip_high)
    M_tok = gather_chunks(M, mask, ids).to(advantages.dtype)
    per_token, s, _ = chunk_clip_loss(logp, old_logp, advantages * M_tok, mask, ids, eps_low=eps_low,
                                      eps_high=eps_high, logr_clamp=logr_clamp)
    metrics = clip_metrics(s, advantages, mask, eps_low, eps_high)
    metrics.update(correction_metrics(M_tok, mask))
    return turn_sample_mean(per_token, mask, ids, denom), metrics
