"""CAPO: curvature-aware token masking from each token's predicted KL and objective shift.

The LM head is read as a linear-logit model, z = W x with x = h / temperature (h the head's input, W [V, H]).
For a response token t with advantage A and sampled token a, restricted to its top-K logits (ids k_1..k_K;
pi their renormalised softmax; e_a the one-hot of a among them, all zero when a is not in the top K):

    v  = e_a - pi                                         [K]
    g  = A v (x)^T                                        [K, H]  gradient of the surrogate A r_t w.r.t. W's K rows
    D  = m_hat / (sqrt(v_hat) + eps)                      [K, H]  Adam's next step per unit lr, were g its gradient
         m_hat, v_hat = the optimizer's moments after one more step with gradient g, bias-corrected at s + 1
    u  = D x                                              [K]     logit change per unit lr
    KL = 1/2 lr^2 (v.u)^2                                 predicted KL ("Fisher" term)
    dJ = lr <g, D> + 1/2 lr^2 A [(v.u)^2 - u^T F u]       predicted surrogate shift ("Hessian" term),
                                                          F = diag(pi) - pi pi^T
    keep t  iff  KL < tau_F  and  -tau_H < dJ < tau_H     (masked tokens get no gradient)

Registered as the objective `capo`: PPO-clip on the kept tokens, the mask predicted on every minibatch from the
trainer's `context.Head` (see `capo` for why an objective rather than a token_mask stage).

Where the terms come from: along W + lr D the sampled token's log-prob moves by lr v.u - 1/2 lr^2 u^T F u + O(lr^3),
so 1/2 lr^2 (v.u)^2 is the sampled-token estimate 1/2 (log r_t)^2 (k2) of the token's KL, whose mean over a ~ pi is
the Fisher form 1/2 lr^2 u^T F u; and r_t = pi_new(a) / pi_old(a) = 1 + lr v.u + 1/2 lr^2 [(v.u)^2 - u^T F u] + O(lr^3),
so dJ is the second-order change of A r_t (<g, D> = A v.u).

Reference: luckeciano/stable-pg-llm `src/open_r1/grpo_entropy_trainer.py` at 933fe0176b140ffa4390e021feb6e8d7da1bd735
(`_compute_token_level_gradients` L437-453, `_compute_and_log_hessian_coefficient` L1375-1476,
`_compute_and_log_fisher_curvature` L1631-1734, the token masks L1009-1048) and
`src/open_r1/sparse_optim_models/sparse_adam_model.py` (`batch_compute_effective_token_gradients`);
transcribed in tests/anchors/formulas_capo.py.
"""
from __future__ import annotations

import torch

from workbench import ops, registry
from workbench.context import Head
from workbench.objectives.ppo import CLIP_LOGS, check_inputs, clip_metrics, ppo_clip_per_token

CAPO_TITLE = "Stabilizing Policy Gradients for Sample-Efficient Reinforcement Learning in LLM Reasoning"
CHUNK = 256  # tokens per block: a block holds [CHUNK, K, H] gradients, moments and steps


def top_k_softmax(logits: torch.Tensor, actions: torch.Tensor, k: int):
    """(pi [N, K], ids [N, K], e_a [N, K]) from logits [N, V] and sampled tokens [N]: the softmax over the K largest
    logits (renormalised, as the reference's `_compute_entropy`) and the one-hot of the sampled token among them."""
    top, ids = logits.topk(min(k, logits.shape[-1]), dim=-1)
    pi = torch.softmax(top, dim=-1)
    return pi, ids, (ids == actions[:, None]).to(pi.dtype)


def token_gradient(x: torch.Tensor, pi: torch.Tensor, e_a: torch.Tensor, advantages: torch.Tensor) -> torch.Tensor:
    """g = A (e_a - pi) x^T [N, K, H]: the gradient of A r_t (at r = 1) w.r.t. the K rows of W, from x [N, H]."""
    return advantages[:, None, None] * (e_a - pi)[:, :, None] * x[:, None, :]


def adam_direction(g: torch.Tensor, exp_avg: torch.Tensor, exp_avg_sq: torch.Tensor, step: int, *, betas,
                   eps: float) -> torch.Tensor:
    """D [N, K, H]: the change of W per unit lr that Adam's next step (its step + 1) makes if g is the gradient of the
    objective. `exp_avg`, `exp_avg_sq` [N, K, H] are the optimizer's moments of the loss gradient (torch's
    convention; the loss is minus the objective, so the objective's first moment is -exp_avg). Zero moments at
    step 0 are Adam's first step, D = g / (|g| + eps)."""
    beta1, beta2 = betas
    t = step + 1
    m = beta1 * -exp_avg + (1 - beta1) * g
    v = beta2 * exp_avg_sq + (1 - beta2) * g * g
    return (m / (1 - beta1 ** t)) / ((v / (1 - beta2 ** t)).sqrt() + eps)


def predicted_kl_and_shift(x, pi, e_a, advantages, direction, lr: float):
    """(KL [N], dJ [N]) of a step lr D along `direction` D [N, K, H] (see the module docstring)."""
    v = e_a - pi
    u = torch.einsum("nkh,nh->nk", direction, x)               # [N, K] logit change per unit lr
    vu = (v * u).sum(-1)
    uFu = (pi * u * u).sum(-1) - (pi * u).sum(-1) ** 2          # u^T (diag(pi) - pi pi^T) u without the K x K matrix
    kl = 0.5 * lr ** 2 * vu ** 2
    shift = lr * advantages * vu + 0.5 * lr ** 2 * advantages * (vu ** 2 - uFu)  # <g, D> = A v.u
    return kl, shift


def predict_token_updates(head: Head, actions: torch.Tensor, advantages: torch.Tensor, valid: torch.Tensor, *,
                          top_k: int = 50, reference_bug: bool = False):
    """(KL [B, T], dJ [B, T]), 0 where `valid` [B, T] is False: each valid token's predicted KL and surrogate shift
    were the optimizer's next step taken on its gradient alone. `actions` [B, T] are the sampled token ids,
    `advantages` [B, T]. Computed in float32 at least (float64 when the head is), without gradient.

    Before the optimizer's first step there are no moments: Adam's first step from zero moments is predicted
    (what the optimizer does). `reference_bug=True` takes the reference's identity preconditioner instead (its
    empty moment table returns the raw gradient, an SGD step, although its rows without moments are Adam from zero).
    """
    dtype = torch.promote_types(head.hidden.dtype, torch.float32)
    home, device = valid.device, head.weight.device  # computed where the head lives, returned where the batch does
    actions, advantages, valid = actions.to(device), advantages.to(device), valid.to(device)
    kl = torch.zeros(valid.shape, dtype=dtype, device=device)
    shift = torch.zeros_like(kl)
    x_all = head.hidden[valid].to(dtype) / head.temperature   # [N, H]: logits / temperature = W x + b / temperature
    W = head.weight.to(dtype)
    b = None if head.bias is None else head.bias.to(dtype) / head.temperature
    moments = None if head.exp_avg is None else (head.exp_avg.to(dtype), head.exp_avg_sq.to(dtype))  # [V, H] each
    A_all, a_all = advantages[valid].to(dtype), actions[valid]
    out = []
    with torch.no_grad():
        for s in range(0, x_all.shape[0], CHUNK):
            x, A = x_all[s:s + CHUNK], A_all[s:s + CHUNK]
            logits = x @ W.T if b is None else x @ W.T + b
            pi, ids, e_a = top_k_softmax(logits, a_all[s:s + CHUNK], top_k)
            g = token_gradient(x, pi, e_a, A)
            if moments is None and reference_bug:
                direction = g
            elif moments is None:
                direction = adam_direction(g, torch.zeros_like(g), torch.zeros_like(g), 0, betas=head.betas,
                                           eps=head.eps)
            else:  # the moments of the K rows this token's gradient touches, [n, K, H]
                direction = adam_direction(g, moments[0][ids], moments[1][ids], head.step, betas=head.betas,
                                           eps=head.eps)
            out.append(predicted_kl_and_shift(x, pi, e_a, A, direction, head.lr))
    if out:
        kl[valid], shift[valid] = torch.cat([k for k, _ in out]), torch.cat([j for _, j in out])
    return kl.to(home), shift.to(home)


def capo_keep(kl: torch.Tensor, shift: torch.Tensor, *, tau_fisher: float, tau_hessian: float, symmetric: bool = True):
    """(fisher_ok, hessian_ok), bool like `kl`: KL < tau_F, and -tau_H < dJ < tau_H (0 <= dJ < tau_H when not
    `symmetric`: the reference's `hessian_symmetric_clipping=False`, which also drops every predicted decrease)."""
    lower = shift > -tau_hessian if symmetric else shift >= 0.0
    return kl < tau_fisher, lower & (shift < tau_hessian)


def check_capo(*, tau_fisher=1e-4, tau_hessian=0.01, top_k=50, **_) -> None:
    for name, tau in (("tau_fisher", tau_fisher), ("tau_hessian", tau_hessian)):
        if not tau > 0:
            raise ValueError(f"{name} must be > 0 (inf switches its test off), got {tau}")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"top_k must be an integer >= 1, got {top_k!r}")


def check_capo_args(head, mask, *, tau_fisher, tau_hessian, top_k) -> None:
    check_capo(tau_fisher=tau_fisher, tau_hessian=tau_hessian, top_k=top_k)
    if not isinstance(head, Head):
        raise ValueError("capo needs head=context.Head (the LM head and its optimizer state), which the trainer "
                         f"supplies to components that read 'head'; got {type(head).__name__}")
    if not head.trained:
        raise ValueError("capo predicts the optimizer's step on the LM head, and this run does not train the head "
                         "(LoRA freezes it): train the full model (lora_r=0) or use another objective")
    if head.step > 0 and head.exp_avg is None:
        raise ValueError("capo preconditions with the optimizer's Adam moments (exp_avg, exp_avg_sq) of the LM head, "
                         "and this optimizer keeps none: use Adam / AdamW")
    if len(head.betas) != 2 or not all(0 <= b < 1 for b in head.betas):
        raise ValueError(f"head.betas must be Adam's two betas in [0, 1), got {head.betas!r}")
    if head.hidden.shape[:2] != mask.shape or head.hidden.shape[-1] != head.weight.shape[-1]:
        raise ValueError(f"head.hidden {tuple(head.hidden.shape)} must be [B, T, H] over mask {tuple(mask.shape)} with "
                         f"H = head.weight's {head.weight.shape[-1]}")


def capo_metrics(kl, fisher_ok, hessian_ok, mask) -> dict[str, float]:
    kept = (fisher_ok & hessian_ok).to(mask.dtype)
    return {"capo/masked_frac": float(ops.masked_mean(1 - kept, mask)),
            "capo/fisher_frac": float(ops.masked_mean(1 - fisher_ok.to(mask.dtype), mask)),
            "capo/hessian_frac": float(ops.masked_mean(1 - hessian_ok.to(mask.dtype), mask)),
            "capo/kl_mean": float(ops.masked_mean(kl.to(mask.dtype), mask))}


CAPO_LOGS = {
    "capo/masked_frac": ("CAPO: fraction of valid tokens rejected (no gradient): predicted KL >= tau_F or |shift| >= "
                         "tau_H.",
                         "About half on Adam's first (sign-like) update, then a few percent (the paper: < 8%). Tens "
                         "of percent for long: lr too high for tau, most tokens lose their gradient; 1: training "
                         "stalls."),
    "capo/fisher_frac": ("CAPO: fraction of valid tokens whose predicted KL 1/2 lr^2 (v.u)^2 is >= tau_F.",
                         "Follows capo/masked_frac; grows as lr^2. Rising over a run: the head's steps get larger."),
    "capo/hessian_frac": ("CAPO: fraction of valid tokens whose predicted surrogate shift is outside (-tau_H, tau_H).",
                          "Follows capo/masked_frac; grows as lr. Near 1 with fisher_frac near 0: tau_H too tight."),
    "capo/kl_mean": ("CAPO: mean predicted per-token KL of the optimizer's next Adam step on the LM head, were it "
                     "taken on that token's gradient alone.",
                     "Scales as lr^2: about 1e-3 at lr 1e-3 on the smoke model, 100 times less at 1e-4. Spikes: a "
                     "large step ahead, which CAPO then masks."),
}


@registry.objective(
    "capo", title=CAPO_TITLE,
    summary="PPO-clip (GRPO) on the tokens whose predicted KL and surrogate shift under the optimizer's own Adam "
            "step on the LM head stay below tau_F and tau_H; the others get no gradient.",
    equation=r"m'_t = m_t\,[\tfrac12\eta^2(v_t^\top u_t)^2 < \tau_F]\,"
             r"[|\eta\langle g_t,\Delta_t\rangle + \tfrac12\eta^2 A_t((v_t^\top u_t)^2 - u_t^\top F_t u_t)| < \tau_H],"
             r"\ g_t = A_t (e_{a_t} - \pi_t) x_t^\top,\ u_t = \Delta_t x_t",
    reads=("head", "response_ids"), logs={**CLIP_LOGS, **CAPO_LOGS}, check=check_capo)
def capo(logp, old_logp, advantages, mask, *, head, response_ids, agg="token-mean", denom=None, tau_fisher=1e-4,
         tau_hessian=0.01, top_k=50, symmetric=True, eps_low=0.2, eps_high=0.2, logr_clamp=None,
         reference_bug=False):
    """CAPO (token level): PPO-clip on mask' = mask [KL_t < tau_fisher] [-tau_hessian < dJ_t < tau_hessian].

    `head` (context.Head) is this update's LM head: its input at each token, its weight and the optimizer's Adam
    moments, lr, betas and eps as of this optimizer step; `response_ids` [B, T] the sampled tokens. KL_t and dJ_t
    are `predict_token_updates`; the per-token PPO loss of the masked tokens is dropped from the aggregation, so they
    get exactly zero gradient. With seq-mean-token-mean (the reference's loss) each sequence averages over its kept
    tokens and the sequence count is the step's (the reference's `per_sentence_loss.mean()`); with token-mean under
    the step's denominators masked tokens still count in N. No token kept: loss 0, no gradient.

    Defaults (the catalog; reference recipe `config_grpo_efficient_grpo_adam_fisher_mask_token_1e-4_hessian_mask_
    token_0.01_capo_only.yaml`): tau_fisher 1e-4 (`fisher_token_mask_tau`), tau_hessian 0.01
    (`hessian_token_mask_tau`), symmetric=True (`hessian_symmetric_clipping: true`), top_k 50 (the reference's
    `generation_config.top_k`: a transformers GenerationConfig built without top_k, default 50; clamped to V);
    eps_low = eps_high = 0.2 (TRL GRPOConfig `epsilon`, not set by the recipe). The reference switches a test off
    with tau = 0; here tau = inf does.

    Our reading (where we differ from the reference):
    - Where it lives: an objective (PPO-clip on CAPO's mask), not a token_mask stage. The prediction needs the
      policy and optimizer state of each update (the reference computes it inside `compute_loss`); a token mask runs
      once per step, before the first minibatch's update, and can log nothing. Here the training forward supplies
      the head's input (no extra forward pass), every minibatch is predicted from its own optimizer state, and the
      rejection metrics are logged.
    - The preconditioner is the policy optimizer's own Adam state of the LM head, not a second moment table: the
      reference keeps a separate "sparse optimizer model" (per-vocabulary-row Adam moments of the batch-mean
      per-token gradient of the kept tokens, updated once per step) and never reads its trainer's optimizer; ours
      predicts the step the optimizer will take, which is what the KL test checks (masked tokens have no gradient,
      so the real moments also follow the kept tokens). A tied embedding's moments include its embedding gradient.
      Decoupled weight decay is left out of the prediction (it moves W by -lr lambda W whatever the token; the
      reference's "adam" model has none).
    - The per-token gradient enters at the reference's scale (A (e_a - pi) x^T, not divided by the loss's token
      count): the moments of a mean-type loss are those of a (weighted) mean of per-token gradients, the scale of
      the reference's table. seq-mean-token-sum-norm's moments are smaller by N / C.
    - Before the optimizer's first step: Adam's first step from zero moments; `reference_bug=True` reproduces the
      reference's identity (SGD) preconditioner there.
    - The token's logits are the sampling temperature's (z / temperature, so x = h / temperature), the log-probs
      this trainer trains; the reference's loss logits are untempered.
    - The mask is recomputed on every minibatch from the current policy and optimizer state, as the reference does
      in `compute_loss`. Token level only (the reference's `capo_only`); the sentence and batch-level variants are
      not implemented.
    Metrics: PPO clip fractions, `capo/masked_frac` (rejected share of valid tokens), `capo/fisher_frac`,
    `capo/hessian_frac` (each test's rejections), `capo/kl_mean` (mean predicted KL).
    """
    check_inputs(logp, old_logp, advantages, mask)
    check_capo_args(head, mask, tau_fisher=tau_fisher, tau_hessian=tau_hessian, top_k=top_k)
    kl, shift = predict_token_updates(head, response_ids, advantages.detach(), mask > 0, top_k=top_k,
                                      reference_bug=reference_bug)
    fisher_ok, hessian_ok = capo_keep(kl, shift, tau_fisher=tau_fisher, tau_hessian=tau_hessian, symmetric=symmetric)
    keep = mask * (fisher_ok & hessian_ok).to(mask.dtype)
    per_token, r, _ = ppo_clip_per_token(logp, old_logp, advantages, eps_low=eps_low, eps_high=eps_high,
                                         logr_clamp=logr_clamp)
    loss = ops.aggregate(per_token, keep, agg, denom) if bool(keep.any()) else (per_token * keep).sum()
    metrics = clip_metrics(r.detach(), advantages, mask, eps_low, eps_high)
    return loss, {**metrics, **capo_metrics(kl, fisher_ok, hessian_ok, mask)}
