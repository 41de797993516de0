"""IPA (ROME): PPO-clip on the interaction-chunk ratio, GSPO's geometric mean taken over a chunk.

    c(t)      the chunk of token t: the policy tokens of its turn (chunks="turn") or its run of mask == 1 ("runs")
    log s_c   = (1/|c|) sum_{t in c} (logp_t - old_t)                      chunk ratio (geometric mean)
    log s_t   = sg(log s_{c(t)}) + logp_t - sg(logp_t)                      token form: value s_c, grad s_c A_t ∇logp_t
    l_t       = -min(s_t A_t, clip(s_t, 1 - eps_low, 1 + eps_high) A_t)     (dual clip: A < 0 -> min(l_t, -c A_t))
    L         = (1/B) sum_i (1/N_i) sum_k (1/|c_ik|) sum_{t in c_ik} l_t    chunk mean, then trajectory mean

One chunk per row is `gspo` (its token form); one token per chunk is token-level `ppo-clip` (seq-mean-token-mean).
A clipped chunk gets no gradient on any of its tokens and leaves the other chunks alone.

Reading (`abstract-only`, the catalog's): chunks are turns, the ratio is GSPO's token form (`objectives/sequence.py`)
over a chunk, the clip is `ppo-clip`'s (`ppo.ppo_clip_per_token`, dual clip included), the loss is averaged per chunk,
then per trajectory (`multiturn.action_mean`, m-grpo's action mean with chunks for actions). chunk_agg=False
aggregates the per-token loss with the recipe's `agg` instead (ROLL's `agg_loss` with `loss_agg_mode`).
Defaults eps_low = eps_high = 0.2 (ROLL `pg_clip`, `roll/configs/base_config.py`), no dual clip (ROLL
`dual_clip_loss: False`; ROLL's cap is c = 1 + 2 pg_clip).

Authors' code: alibaba/ROLL @ 8eb27cc `roll/pipeline/agentic/agentic_actor_worker.py::ActorWorker.loss_func`
(`ratio_type == "segment"`: ratio = exp(`compute_segment_masked_mean`(logp - old, response_mask)), PPO clip, dual
clip) and `agentic_actor_pg_worker.py` (the same ratio). ROLL differentiates exp(chunk mean) directly, which spreads
each token's loss gradient over its chunk: s_c mean_{t in c}(A_t) ∇logp_t' for every t' in c, equal to the token form's
s_c A_t' ∇logp_t' when A is constant on the chunk (it is, for both `ipa` advantages) and the chunk is clipped as a
whole (tests/anchors/test_ipa.py).
"""
from __future__ import annotations

import torch

from workbench import ops, registry
from workbench.advantages.ipa import CHUNKS, IPA_TITLE, chunk_ids, chunk_mean, chunk_table
from workbench.objectives.multiturn import action_mean
from workbench.objectives.ppo import CLIP_LOGS, DUAL_CLIP_LOGS, check_inputs, clip_metrics, ppo_clip_per_token


def chunk_log_ratio(logp, old_logp, mask, ids) -> torch.Tensor:
    """[B, T] log s_c(t), detached: the mean log-ratio over each token's chunk (0 off the mask)."""
    return chunk_mean((logp - old_logp).detach(), mask, ids)


def chunk_clip_loss(logp, old_logp, advantages, mask, ids, *, eps_low, eps_high, dual_clip_c=None, logr_clamp=None):
    """Per-token loss [B, T] on the chunk ratio in token form, the ratio s_t [B, T] (detached) and where the dual
    clip binds: `ppo_clip_per_token` applied to log s_t = sg(log s_c) + logp - sg(logp) (against log-ratio 0)."""
    log_s_tok = chunk_log_ratio(logp, old_logp, mask, ids) + logp - logp.detach()
    per_token, s, dual = ppo_clip_per_token(log_s_tok, torch.zeros_like(log_s_tok), advantages, eps_low=eps_low,
                                            eps_high=eps_high, dual_clip_c=dual_clip_c, logr_clamp=logr_clamp)
    return per_token, s.detach(), dual


def chunks_per_row(mask, ids) -> float:
    """Mean number of chunks of the rows that have a policy token."""
    _, counts = chunk_table(mask, mask, ids)
    rows = (mask.sum(-1) > 0).to(mask.dtype)
    return float(ops.masked_mean((counts > 0).sum(-1).to(mask.dtype), rows))


IPA_LOGS = {
    "ipa/chunks_per_row": ("IPA: mean number of interaction chunks (turns, or runs of policy tokens) per row.",
                           "The episodes' mean turn count with chunks='turn'; with chunks='runs', more than that "
                           "means masked tokens inside turns split them (e.g. a token mask), fewer that turns merged."),
}


@registry.objective(
    "ipa", title=IPA_TITLE,
    summary="PPO-clip on the interaction-chunk ratio (GSPO's geometric mean over one turn's policy tokens), "
            "averaged per chunk, then per trajectory.",
    equation=r"\ell_t = -\min\big(s_{c(t)}A_t,\ \mathrm{clip}(s_{c(t)}, 1-\epsilon_{low}, 1+\epsilon_{high})A_t\big),"
             r"\ s_c = \exp\Big(\tfrac{1}{|c|}\sum_{t\in c}\log\tfrac{\pi_\theta}{\pi_{old}}\Big)",
    reads=("turn",), needs=("multi_turn",), logs={**CLIP_LOGS, **DUAL_CLIP_LOGS, **IPA_LOGS},
    choices={"chunks": CHUNKS})
def ipa(logp, old_logp, advantages, mask, *, turn=None, agg="seq-mean-token-mean", denom=None, eps_low=0.2,
        eps_high=0.2, dual_clip_c=None, chunks="turn", chunk_agg=True, logr_clamp=None):
    """IPA's chunk-ratio loss. `turn` [B, T] gives the chunks (chunks='turn'; without it a row is one chunk).

    chunk_agg=True (default): chunk mean, then trajectory mean; `agg` must then be 'seq-mean-token-mean' (rows
    are averaged; `denom.num_seqs` counts them across micro-batches). chunk_agg=False: `ops.aggregate(agg, denom)`.
    dual_clip_c: ROLL's `dual_clip_loss` is c = 1 + 2 eps (1.4). Metrics: clip fractions of the chunk ratios over
    tokens, `ipa/chunks_per_row`.
    """
    if chunk_agg and agg != "seq-mean-token-mean":
        raise ValueError("ipa averages per chunk, then per trajectory: leave agg='seq-mean-token-mean', or pass "
                         f"chunk_agg=False to aggregate with agg={agg!r} (ROLL's loss_agg_mode)")
    check_inputs(logp, old_logp, advantages, mask)
    ids = chunk_ids(mask, turn, chunks)
    per_token, s, dual = chunk_clip_loss(logp, old_logp, advantages, mask, ids, eps_low=eps_low, eps_high=eps_high,
                                         dual_clip_c=dual_clip_c, logr_clamp=logr_clamp)
    loss = action_mean(per_token, mask, ids, denom) if chunk_agg else ops.aggregate(per_token, mask, agg, denom)
    metrics = clip_metrics(s, advantages, mask, eps_low, eps_high, dual)
    metrics["ipa/chunks_per_row"] = chunks_per_row(mask, ids)
    return loss, metrics
