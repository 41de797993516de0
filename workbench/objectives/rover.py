"""ROVER: regress the policy's log-ratio onto the uniform-random policy's Q target.

Random Policy Valuation: in a deterministic tree MDP with binary terminal rewards (a response is a path of tokens,
the verifier scores the leaf), acting greedily on the Q-values of the *uniformly random* policy is optimal: a
prefix's Q^uniform is the share of its leaves that are correct, positive iff a correct leaf lies below it. ROVER
parametrizes that Q by the policy's own log-ratio to the policy that sampled, and samples from softmax(Q / rho)
around pi_old. For response token t (state s_t, token a_t), with r~ the group-centred reward broadcast over the
response (the recipe's advantage: GRPO z-score on Math, the group mean only on Countdown):

    Q(s_t, a_t)      = rho (log pi_theta(a_t | s_t) - log pi_old(a_t | s_t))                      rho = `rover_t` = 1
    V_unif(s_{t+1})  = rho (mean_v log pi_theta(v | s_{t+1}) - mean_v log pi_old(v | s_{t+1}))    0 after the last token
                       mean_v log softmax(z)_v = mean_v z_v - logsumexp(z)        (over the vocabulary)
    y_t              = r~ + sg(V_unif(s_{t+1}))                                                    (y = r~ at the last)
    L                = masked mean_t (Q(s_t, a_t) - sg(y_t))^2

At theta = theta_old, Q = 0 and V_unif = 0, so y = r~ and the gradient is -2 rho r~ grad log pi(a_t | s_t) per token:
REINFORCE with the centred reward. Options (the authors' actor): `use_rover_clip` replaces Q by the constant
log(1 + eps) where Q > log(1 + eps) and y > Q, by log(1 - eps) where Q < log(1 - eps) and y < Q (no gradient
moving further from pi_old); `response_level=True` is the loss mean_i (mean_t Q_{i,t} - r~_i)^2 (no next-state term).

Where the two terms come from here (no extra forward pass): the current mean_v log pi_theta(v | s) from the training
forward's LM head (`context.Head`: logits / temperature = (hidden W^T + b) / temperature; the head is checked to
reproduce the forward's log-probs of the sampled tokens), the old one from the old-log-prob pass
(`RolloutBatch.old_vocab_mean_logp`, the logit statistic `vocab_mean_logp` that pass computes because this objective
reads it; this also turns off the on-policy shortcut, so pi_old is always a separate no-gradient pass, as the
authors' `compute_log_prob`). Both at the sampling temperature (the authors divide the logits by it first).

Our reading: s_{t+1} is the state of the row's *next policy token* (on one-turn rows the next position, as the
authors' shift by one; on multi-turn rows the next turn's first action token, past the observation tokens, which
the authors' one-turn code never meets). The response-level target r~_i is the mean of the row's advantages over
its tokens (the authors take the first token's, the same on broadcast advantages).

Defaults (yuxiaooye/ROVER Math recipe `rover_qwen3_8b.sh` and `dp_actor.yaml`): rho 1.0, clip off, clip_ratio 0.2
(verl's `clip_ratio`), token-level loss, next_q_scale 1.0 (`next_q_scale_factor`); G = 8, temperature 0.6, lr 1e-6,
one epoch, four minibatches per step, no KL, no entropy bonus, GRPO advantage with std.

Reference: yuxiaooye/ROVER @ ea5ce635ee03621035d6659845a387879cf20878 `Math/verl/workers/actor/dp_actor.py`
(`DataParallelROVERActor.update_policy`, L895-1022), `Math/verl/trainer/ppo/core_algos.py::compute_rover_loss`,
`Math/verl/utils/torch_functional.py::sum_log_softmax`; transcribed in tests/anchors/formulas_rover.py. The
code's batch-wide reward shaping (`adv_estimator=rover`) is the advantage `rover` (workbench/advantages/rover.py).
"""
from __future__ import annotations

import math

import torch

from workbench import ops, registry
from workbench.context import Head
from workbench.objectives.ppo import check_inputs

ROVER_TITLE = "Random Policy Valuation is Enough for LLM Reasoning with Verifiable Rewards"
CHUNK = 256        # positions per block of [CHUNK, V] log-probs recomputed from the head
# How far, on average over the valid tokens, the head's log-probs of the sampled tokens may be from the forward's: the
# head is recomputed in float32 at least, a half-precision forward rounds its logits (about 2^-8 relative).
HEAD_ATOL = {torch.float64: 1e-3, torch.float32: 1e-3, torch.bfloat16: 5e-2, torch.float16: 5e-2}


# ----------------------------------------------------------------------------------- positions and the LM head


def next_policy_index(mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(index [B, T] long, has_next [B, T] bool): the position of the next policy token after t in its row (0 where
    there is none), and whether there is one."""
    B, T = mask.shape
    positions = torch.arange(T, device=mask.device).expand(B, T)
    own = torch.where(mask > 0, positions, torch.full_like(positions, T))                  # T where not a policy token
    after = torch.cat([own[:, 1:], torch.full_like(own[:, :1], T)], dim=1)                 # candidates strictly after t
    first_after = after.flip(-1).cummin(-1).values.flip(-1)                                 # min over u > t
    has_next = first_after < T
    return torch.where(has_next, first_after, torch.zeros_like(first_after)), has_next


def at_next_policy_token(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """x [B, T] at the next policy token after each t (0 after a row's last): x(s_{t+1})."""
    index, has_next = next_policy_index(mask)
    return torch.where(has_next, x.gather(1, index), torch.zeros_like(x))


def head_stats(head: Head, valid: torch.Tensor, tokens: tuple = ()):
    """(mean_v log pi(v | s_t), max_v log pi(v | s_t), [log pi(x_t | s_t) for each x [B, T] in `tokens`]), each
    [B, T] and 0 where `valid` [B, T] is False, recomputed without gradient from the LM head: log softmax of
    (hidden W^T + b) / temperature, in float32 at least, CHUNK positions at a time."""
    dtype = torch.promote_types(head.hidden.dtype, torch.float32)
    home, device = valid.device, head.weight.device  # computed where the head lives, returned where the batch does
    valid = valid.to(device)
    x_all, W = head.hidden[valid].to(dtype), head.weight.to(dtype)                       # [N, H], [V, H]
    b = None if head.bias is None else head.bias.to(dtype)
    picks = [x.to(device)[valid] for x in tokens]                                          # [N] token ids each
    parts = []
    with torch.no_grad():
        for s in range(0, x_all.shape[0], CHUNK):
            logits = x_all[s:s + CHUNK] @ W.T if b is None else x_all[s:s + CHUNK] @ W.T + b
            lp = torch.log_softmax(logits / head.temperature, dim=-1)                      # [n, V]
            parts.append([lp.mean(-1), lp.max(-1).values] + [lp.gather(-1, p[s:s + CHUNK, None])[:, 0] for p in picks])
    out = []
    for k in range(2 + len(tokens)):
        full = torch.zeros(valid.shape, dtype=dtype, device=device)
        if parts:
            full[valid] = torch.cat([p[k] for p in parts])
        out.append(full.to(home))
    return out[0], out[1], out[2:]


def check_head(head, mask: torch.Tensor, method: str) -> None:
    if not isinstance(head, Head):
        raise ValueError(f"{method} needs head=context.Head (the LM head at the training forward), which the trainer "
                         f"supplies to components that read 'head'; got {type(head).__name__}")
    if head.hidden.shape[:2] != mask.shape or head.hidden.shape[-1] != head.weight.shape[-1]:
        raise ValueError(f"head.hidden {tuple(head.hidden.shape)} must be [B, T, H] over mask {tuple(mask.shape)} with "
                         f"H = head.weight's {head.weight.shape[-1]}")


def check_head_reproduces(head_logp: torch.Tensor, logp: torch.Tensor, valid: torch.Tensor, method: str,
                          hidden_dtype: torch.dtype = torch.float32) -> None:
    """The head's log-probs of the sampled tokens must be the forward's (mean gap within `HEAD_ATOL` of the hidden
    states' dtype): a model whose logits are not (hidden W^T + b) (final logit soft-capping, a scaled head) would give
    the statistics of another policy."""
    gap = float((head_logp - logp.detach().to(head_logp.dtype)).abs()[valid].mean()) if bool(valid.any()) else 0.0
    tol = HEAD_ATOL.get(hidden_dtype, 5e-2)
    if gap > tol:
        raise ValueError(f"{method}: the LM head's log-probs of the sampled tokens differ from the forward's by "
                         f"{gap:.3g} on average (> {tol}): this model's logits are not hidden @ W^T + b (soft-capping "
                         "or scaling after the head?), so its vocabulary statistics cannot be recomputed from the head")


# ------------------------------------------------------------------------------------------------ the objective


def rover_q(logp: torch.Tensor, old_logp: torch.Tensor, rho: float) -> torch.Tensor:
    """Q(s_t, a_t) = rho (log pi_theta - log pi_old) [B, T] (the authors' `logIS`)."""
    return rho * (logp - old_logp)


def uniform_next_value(vocab_mean: torch.Tensor, old_vocab_mean: torch.Tensor, mask: torch.Tensor,
                       rho: float) -> torch.Tensor:
    """V_unif(s_{t+1}) = rho (mean_v log pi_theta(v | s_{t+1}) - mean_v log pi_old(v | s_{t+1})) [B, T], 0 after a
    row's last policy token; `vocab_mean`, `old_vocab_mean` [B, T] are mean_v log pi(v | s_t) at each position."""
    return rho * at_next_policy_token((vocab_mean - old_vocab_mean.to(vocab_mean.dtype)) * (mask > 0), mask)


def rover_target(advantages: torch.Tensor, next_value: torch.Tensor, next_q_scale: float = 1.0) -> torch.Tensor:
    """y_t = r~ + next_q_scale * V_unif(s_{t+1}), detached."""
    return (advantages + next_q_scale * next_value.to(advantages.dtype)).detach()


def rover_clip(q: torch.Tensor, target: torch.Tensor, clip_ratio: float):
    """(Q', high [B, T] bool, low [B, T] bool): Q replaced by the constant log(1 + eps) where Q > log(1 + eps) and the
    target lies above it, by log(1 - eps) where Q < log(1 - eps) and the target lies below (`use_rover_clip`)."""
    hi, lo = math.log1p(clip_ratio), math.log1p(-clip_ratio)
    high = (target > q) & (q > hi)
    low = (target < q) & (q < lo)
    return torch.where(high, torch.full_like(q, hi), torch.where(low, torch.full_like(q, lo), q)), high, low


def response_level_loss(q: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor, denom) -> torch.Tensor:
    """mean over sequences of (mean_t Q_{i,t} - r~_i)^2, r~_i the row's mean advantage (the step's sequence count
    from `denom`, as every seq-mean aggregation)."""
    m = mask.to(q.dtype)
    n = m.sum(-1).clamp(min=1)
    per_seq = ((q * m).sum(-1) / n - ((advantages * m).sum(-1) / n).detach()) ** 2               # [B]
    return ops.aggregate(per_seq[:, None].expand_as(q), mask, "seq-mean-token-mean", denom)


def check_rover_args(*, rho=1.0, clip_ratio=0.2, next_q_scale=1.0, **_) -> None:
    if not rho > 0:
        raise ValueError(f"rho (the authors' rover_t) must be > 0, got {rho}")
    if not 0 < clip_ratio < 1:
        raise ValueError(f"clip_ratio must be in (0, 1) (the clip is [log(1 - eps), log(1 + eps)]), got {clip_ratio}")
    if not math.isfinite(next_q_scale):
        raise ValueError(f"next_q_scale must be finite, got {next_q_scale}")


def rover_metrics(q, next_value, target, mask, high=None, low=None) -> dict[str, float]:
    with torch.no_grad():
        m = {"rover/q_mean": ops.masked_mean(q.detach(), mask),
             "rover/next_v_mean": ops.masked_mean(next_value.to(mask.dtype), mask),
             "rover/target_mean": ops.masked_mean(target.to(mask.dtype), mask)}
        if high is not None:
            m["rover/clip_high"] = ops.masked_mean(high.to(mask.dtype), mask)
            m["rover/clip_low"] = ops.masked_mean(low.to(mask.dtype), mask)
    return {k: float(v) for k, v in m.items()}


ROVER_LOGS = {
    "rover/q_mean": ("ROVER: mean Q = rho log(pi / pi_old) of the sampled tokens (0 on the first minibatch after a "
                     "rollout).",
                     "Near 0, within +-0.1 on later minibatches (pi stays near pi_old at lr 1e-6). Drifting far: the "
                     "policy leaves pi_old faster than the target moves; lower lr or turn the clip on."),
    "rover/next_v_mean": ("ROVER: mean uniform-policy value of the next state, rho (mean_v log pi - mean_v log "
                          "pi_old) at s_{t+1} (0 after the last token).",
                          "Near 0 (the same scale as rover/q_mean). Large: the next-state term, not the reward, "
                          "drives the target."),
    "rover/target_mean": ("ROVER: mean regression target y = r~ + V_unif(s_{t+1}).",
                          "About the mean advantage (0 for a centred r~). Large and one-signed: the bootstrap "
                          "dominates."),
    "rover/clip_high": ("ROVER (use_rover_clip): share of tokens whose Q > log(1 + eps) is held there (target above).",
                        "0 on the first minibatch, a few percent later. Tens of percent: updates move the policy too "
                        "far."),
    "rover/clip_low": ("ROVER (use_rover_clip): share of tokens whose Q < log(1 - eps) is held there (target below).",
                       "As rover/clip_high, for the moves down."),
}


@registry.objective(
    "rover", title=ROVER_TITLE,
    summary="Squared regression of Q = rho log(pi/pi_old) on r~ + V_unif(s'), the uniform-policy value of the next "
            "state from the vocabulary-mean log-ratio: Q-learning of the random policy, no clip, critic or KL.",
    equation=r"\ell_t = \big(\rho\log\tfrac{\pi_\theta(a_t|s_t)}{\pi_{old}(a_t|s_t)} - \mathrm{sg}\big[\tilde r + "
             r"\rho\,\overline{\log\pi_\theta}(s_{t+1}) - \rho\,\overline{\log\pi_{old}}(s_{t+1})\big]\big)^2,\ "
             r"\overline{\log\pi}(s) = \tfrac{1}{|\mathcal V|}\sum_v \log\pi(v|s)",
    reads=("head", "response_ids", "old_vocab_mean_logp"), logs=ROVER_LOGS, check=check_rover_args)
def rover(logp, old_logp, advantages, mask, *, head, response_ids, old_vocab_mean_logp, agg="token-mean", denom=None,
          rho=1.0, use_rover_clip=False, clip_ratio=0.2, response_level=False, next_q_scale=1.0):
    """ROVER loss (module docstring): (Q - sg(y))^2 aggregated by `agg` (the authors: token mean), or the
    response-level variant. `advantages` [B, T] are r~ broadcast (the recipe's group-centred reward);
    `old_vocab_mean_logp` [B, T] the old policy's mean_v log pi(v | s_t); `head` the training forward's LM head,
    `response_ids` [B, T] the sampled tokens (to check that the head reproduces the forward).

    Metrics: `rover/q_mean` (mean Q = rho log-ratio), `rover/next_v_mean` (mean V_unif(s_{t+1})),
    `rover/target_mean` (mean y), and with the clip `rover/clip_high`, `rover/clip_low` (shares of clipped tokens).
    """
    check_rover_args(rho=rho, clip_ratio=clip_ratio, next_q_scale=next_q_scale)
    check_inputs(logp, old_logp, advantages, mask)
    check_head(head, mask, "rover")
    if old_vocab_mean_logp is None or old_vocab_mean_logp.shape != mask.shape:
        raise ValueError("rover needs old_vocab_mean_logp [B, T] (the old-log-prob pass computes it when a component "
                         f"reads it), got {None if old_vocab_mean_logp is None else tuple(old_vocab_mean_logp.shape)}")
    valid = mask > 0
    vocab_mean, _, (head_logp,) = head_stats(head, valid, (response_ids,))
    check_head_reproduces(head_logp, logp, valid, "rover", head.hidden.dtype)
    q = rover_q(logp, old_logp, rho)
    next_value = uniform_next_value(vocab_mean, old_vocab_mean_logp, mask, rho)
    target = rover_target(advantages, next_value, next_q_scale)
    high = low = None
    if use_rover_clip:
        q, high, low = rover_clip(q, target, clip_ratio)
    if response_level:
        loss = response_level_loss(q, advantages, mask, denom)
    else:
        loss = ops.aggregate((q - target) ** 2, mask, agg, denom)
    return loss, rover_metrics(q, next_value, target, mask, high, low)


# ------------------------------------------------------------------------------ the claim, on enumerable trees


def uniform_q(mdp, gamma: float = 1.0):
    """`advantages.exact.Exact` of the uniformly random policy on an enumerable episodic problem (`EpisodeMDP`):
    Q^uniform(h, a) for every history h, by dynamic programming from the leaves."""
    from workbench.advantages.exact import exact_values, tabular_policy

    return exact_values(mdp, tabular_policy(mdp, temperature=math.inf), gamma)


def rover_policy(q: list[float] | torch.Tensor, rho: float = 1.0) -> torch.Tensor:
    """softmax(Q / rho) over a state's actions: the policy ROVER samples from (greedy as rho -> 0)."""
    return torch.softmax(torch.as_tensor(q, dtype=torch.float64) / rho, dim=-1)
