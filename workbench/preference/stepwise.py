"""Step- and turn-level preference objectives: MCTS-DPO (sibling reasoning steps), REFUEL (multi-turn REBEL at a
branching turn) and Direct Advantage PO (regress step log-ratios onto critic advantages), with the shared
primitive `seq_logp(logp, mask, start)` (catalog §0.5): a per-sequence log-prob summed from a start index,
e.g. the first token where two sibling continuations diverge.

    seq_logp(token_logp[B, T], mask[B, T], start[B]) -> [B]
    mcts_dpo(chosen, rejected, ref_chosen, ref_rejected, *, chosen_q, rejected_q, ...)   suffix sums [B]
    refuel(chosen, rejected, ref_chosen, ref_rejected, *, chosen_reward, rejected_reward, eta)  turn-h sums [B]
    direct_advantage_po(step_logp, ref_step_logp, advantages, *, beta)   one entry per sampled step
"""
from __future__ import annotations

import torch

from workbench import registry
from workbench.preference.base import TRL_LOGS, check_beta, check_pairs, dpo_metrics
from workbench.preference.listwise import PAIR_LOSS_TYPES, pair_loss

# ---------------------------------------------------------------------------------------------- primitives


def seq_logp(logp: torch.Tensor, mask: torch.Tensor, start=0, *, allow_empty: bool = False) -> torch.Tensor:
    """sum_{t >= start_b} mask_{b,t} logp_{b,t} per row ([B]); positions before `start` get no gradient.

    logp, mask: [B, T] token log-probs and response mask (1 = counted). start: int or [B] integer indices in
    [0, T] (T = nothing left). Rows with no counted token are a ValueError unless allow_empty (then 0);
    NaN/inf log-probs at counted positions are a ValueError (values at uncounted positions are ignored).
    """
    if logp.dim() != 2 or logp.shape != mask.shape:
        raise ValueError(f"seq_logp needs logp and mask of the same [B, T] shape; got {tuple(logp.shape)} "
                         f"and {tuple(mask.shape)}")
    B, T = logp.shape
    start = torch.as_tensor(start, device=logp.device)
    if start.is_floating_point() or start.is_complex():
        raise ValueError(f"start must hold integer token indices, got dtype {start.dtype}")
    start = start.long().expand(B) if start.dim() == 0 else start.long()
    if start.shape != (B,):
        raise ValueError(f"start must be an int or have shape [{B}], got {tuple(start.shape)}")
    if bool(((start < 0) | (start > T)).any()):
        raise ValueError(f"start indices must lie in [0, {T}]; got {start.tolist()}")
    keep = (torch.arange(T, device=logp.device)[None, :] >= start[:, None]) & (mask != 0)
    empty = ~keep.any(-1)
    if bool(empty.any()) and not allow_empty:
        rows = torch.nonzero(empty).flatten().tolist()[:10]
        raise ValueError(f"rows {rows} have no response token at or after their start index (empty response or "
                         "identical continuations): nothing to score")
    if not bool(torch.isfinite(logp[keep]).all()):
        rows = torch.nonzero((keep & ~torch.isfinite(logp)).any(-1)).flatten().tolist()[:10]
        raise ValueError(f"NaN/inf token log-probs at counted positions in rows {rows}")
    return torch.where(keep, logp, torch.zeros_like(logp)).sum(-1)


def first_diverging_token(chosen_ids: torch.Tensor, rejected_ids: torch.Tensor,
                          chosen_mask: torch.Tensor | None = None,
                          rejected_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Index of the first position where two aligned token rows differ ([B] long).

    Rows are compared over the common length; a difference in the masks counts as divergence (one
    sequence ended). Rows identical over the common length diverge at that length (at T when the shapes
    are equal, i.e. no divergence: `seq_logp` then reports the empty suffix).
    """
    if chosen_ids.dim() != 2 or rejected_ids.dim() != 2 or chosen_ids.shape[0] != rejected_ids.shape[0]:
        raise ValueError(f"token ids must be [B, T] with equal B; got {tuple(chosen_ids.shape)} and "
                         f"{tuple(rejected_ids.shape)}")
    T = min(chosen_ids.shape[1], rejected_ids.shape[1])
    differ = chosen_ids[:, :T] != rejected_ids[:, :T]
    if chosen_mask is not None or rejected_mask is not None:
        cm = torch.ones_like(chosen_ids, dtype=torch.bool) if chosen_mask is None else chosen_mask != 0
        rm = torch.ones_like(rejected_ids, dtype=torch.bool) if rejected_mask is None else rejected_mask != 0
        differ = (differ & (cm[:, :T] | rm[:, :T])) | (cm[:, :T] != rm[:, :T])
    idx = torch.arange(T, device=chosen_ids.device).expand_as(differ)
    return torch.where(differ, idx, torch.full_like(idx, T)).min(-1).values


# ---------------------------------------------------------------------------------------------- MCTS-DPO


def conservative_label_smoothing(chosen_q: torch.Tensor, rejected_q: torch.Tensor, *,
                                 reference_bug: bool = False) -> torch.Tensor:
    """MCTS-DPO's per-pair label smoothing from the MCTS values of the chosen / rejected steps.

        conf = 1 / (1 + q_w / max(1, q_b)),   eps = min(1 - conf, 0.5)           (YuxiXie/MCTS-DPO trainer)

    Known issue (catalog §0.6): q_w < 0 gives conf > 1 (a negative eps, i.e. anti-smoothing) and
    q_w = -max(1, q_b) divides by zero. Workbench rule: eps is clamped to [0, 0.5], with conf = +inf at the
    pole (eps = 0) and conf < 0 beyond it (eps = 0.5, maximal uncertainty). reference_bug=True returns the
    unclamped reference value (can be negative, -inf or NaN) for regression tests.
    """
    qw = torch.as_tensor(chosen_q, dtype=torch.float64 if not torch.is_tensor(chosen_q) else None)
    qb = torch.as_tensor(rejected_q, dtype=qw.dtype, device=qw.device)
    if qw.shape != qb.shape:
        raise ValueError(f"chosen_q {tuple(qw.shape)} and rejected_q {tuple(qb.shape)} differ in shape")
    if not bool(torch.isfinite(qw).all() & torch.isfinite(qb).all()):
        raise ValueError("MCTS values chosen_q / rejected_q contain NaN/inf")
    denom = 1 + qw / qb.clamp(min=1)
    if reference_bug:
        return torch.minimum(1 - 1 / denom, torch.full_like(denom, 0.5))
    conf = torch.where(denom == 0, torch.full_like(denom, float("inf")), 1 / torch.where(denom == 0, 1, denom))
    return (1 - conf).clamp(0.0, 0.5)


MCTS_DPO_LOGS = {
    "mcts/label_smoothing": ("MCTS-DPO: mean label smoothing of the step pairs (0 = plain DPO on the steps).",
                             "Exactly 0 with the mcts-dpo recipe (the conservative smoothing is off). With chosen_q "
                             "and rejected_q passed it lies in [0, 0.5]; near 0.5 the pairs carry almost no gradient."),
}


def check_mcts_dpo(*, label_smoothing=0.0, loss_type="sigmoid", **_) -> None:
    if loss_type == "ipo" and label_smoothing != 0:
        raise ValueError(f"the IPO loss takes no label smoothing, got label_smoothing={label_smoothing}; use "
                         "loss_type='sigmoid'")


@registry.preference(
    "mcts-dpo", title="Monte Carlo Tree Search Boosts Reasoning via Iterative Preference Learning",
    summary="Step-level DPO on MCTS sibling steps (chosen = highest-value child, rejected = a lower one), log-probs "
            "summed from the first diverging token; conservative per-pair label smoothing from the MCTS values.",
    equation=r"z = [\log\pi(y_w^{\ge k}) - \log\pi_{ref}(y_w^{\ge k})] - [\log\pi(y_l^{\ge k}) - "
             r"\log\pi_{ref}(y_l^{\ge k})];\ L = -(1-\epsilon)\log\sigma(\beta z) - \epsilon\log\sigma(-\beta z),\ "
             r"\epsilon = \mathrm{clip}(1 - \frac{1}{1 + q_w/\max(1, q_b)}, 0, 0.5)",
    logs={**TRL_LOGS, **MCTS_DPO_LOGS}, choices={"loss_type": PAIR_LOSS_TYPES}, check=check_mcts_dpo)
def mcts_dpo(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, *, beta=0.1, chosen_q=None,
             rejected_q=None, label_smoothing=0.0, loss_type="sigmoid"):
    r"""MCTS-DPO (Xie et al. 2024) step-level preference loss.

    Inputs: per-pair log-probs of the chosen / rejected sibling steps summed from the first diverging token
    k to the end of the step (shared prefix excluded): build them with `seq_logp(token_logp, step_mask,
    first_diverging_token(chosen_ids, rejected_ids))`, for the policy and the reference. (The shared prefix
    would cancel in z anyway; excluding it also removes its gradient.) Extra keyword inputs:
      - `chosen_q`, `rejected_q` [B]: MCTS Q values of the two children. Given: the conservative variant,
        eps per pair from `conservative_label_smoothing` (clamped to [0, 0.5], catalog §0.6). None: the fixed
        `label_smoothing` (0 = plain DPO on the diverging suffix).
      - `loss_type`: "sigmoid" (DPO, label-smoothed) or "ipo" ((z - 1/(2 beta))^2, no smoothing).
    Defaults from the reference script: beta = 0.1. The loss is the mean over pairs.
    Metrics: TRL names over the suffix log-probs, plus `mcts/label_smoothing` (mean eps).
    """
    check_beta(beta)
    check_pairs(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp)
    if (chosen_q is None) != (rejected_q is None):
        raise ValueError("give both chosen_q and rejected_q (the MCTS values) or neither")
    if chosen_q is not None:
        kw = dict(dtype=chosen_logp.dtype, device=chosen_logp.device)
        eps = conservative_label_smoothing(torch.as_tensor(chosen_q, **kw), torch.as_tensor(rejected_q, **kw))
        if eps.shape != chosen_logp.shape:
            raise ValueError(f"chosen_q / rejected_q must have one value per pair {tuple(chosen_logp.shape)}, "
                             f"got {tuple(eps.shape)}")
    else:
        if not (0 <= label_smoothing <= 0.5):
            raise ValueError(f"label_smoothing must lie in [0, 0.5], got {label_smoothing}")
        check_mcts_dpo(label_smoothing=label_smoothing, loss_type=loss_type)
        eps = torch.full_like(chosen_logp.detach(), float(label_smoothing))
    if loss_type == "ipo" and bool((eps != 0).any()):
        raise ValueError("the IPO loss takes no label smoothing; use loss_type='sigmoid' with chosen_q/rejected_q")
    logits = (chosen_logp - ref_chosen_logp) - (rejected_logp - ref_rejected_logp)
    loss = pair_loss(logits, beta, loss_type, eps.to(logits.device)).mean()
    metrics = dpo_metrics(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, beta)
    metrics["mcts/label_smoothing"] = float(eps.mean())
    return loss, metrics


# ---------------------------------------------------------------------------------------------- REFUEL


REFUEL_LOGS = {
    "refuel/reward_gap": ("REFUEL: mean reward difference of the pairs being regressed onto.",
                          "Exactly 1 on the task's pairs (chosen scores 1, rejected 0): data, not a training signal. "
                          "Other values only with graded rewards."),
    "refuel/sign_align": ("REFUEL: share of pairs whose log-ratio margin (chosen minus rejected) is > 0, the "
                          "reference code's sign_align.",
                          "0 at step 0 (the margins are exactly 0 and the test is strict), rising towards 1 as "
                          "margins approach eta * gap = 1. Stuck low: the regression is not separating the pairs."),
}


@registry.preference(
    "refuel", title="Regressing the Relative Future: Efficient Policy Optimization for Multi-turn RLHF",
    summary="Multi-turn REBEL: branch two responses at a random turn h, roll both dialogues out to the end, and "
            "regress the difference of the turn-h log-ratios (vs the previous iterate) onto eta times the "
            "difference of the whole-dialogue rewards.",
    equation=r"L = \big([\log\pi_\theta(y|s_h) - \log\pi_t(y|s_h)] - [\log\pi_\theta(y'|s_h) - \log\pi_t(y'|s_h)]"
             r" - \eta\,(\hat Q(s_h, y) - \hat Q(s_h, y'))\big)^2", logs={**TRL_LOGS, **REFUEL_LOGS})
def refuel(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, *, chosen_reward=None,
           rejected_reward=None, eta=1.0):
    r"""REFUEL (Gao et al. 2024), as in ZhaolinGao/REFUEL `setting_one/refuel.py`:

        reg_diff = (new_logprob - logprob)[chosen] - (new_logprob - logprob)[reject]
                   - eta * (chosen_reward - reject_reward);   loss = mean(reg_diff ** 2)

    Inputs: summed log-probs of the turn-h responses only (the mask covers the turn-h assistant tokens;
    `seq_logp(token_logp, turn_h_mask)`), for the current policy (`chosen_logp`, `rejected_logp`) and for
    the previous iterate pi_t (`ref_*`, the data-generating policy). "chosen" is the continuation with the
    higher whole-dialogue reward, but the loss is symmetric in the pair. Extra keyword inputs:
    `chosen_reward`, `rejected_reward` [B] (required): Q^(s_h, y), the reward of the whole dialogue rolled
    out after y. eta = 1.0 (code default; the README example uses 1e3). One turn (h = 0, mask = the whole
    response, Q^ = the response reward) is REBEL, up to the factor eta^2 between REBEL's
    ((1/eta) d - dr)^2 and this (d - eta dr)^2.
    Metrics: TRL names with beta = 1 (log-ratios vs pi_t), `refuel/sign_align` (fraction of pairs whose
    log-ratio difference is > 0, the reference code's `sign_align`), `refuel/reward_gap` (mean Q^ difference).
    """
    if chosen_reward is None or rejected_reward is None:
        raise ValueError("refuel needs chosen_reward and rejected_reward (Q^ of the two rolled-out dialogues)")
    if not (eta > 0):
        raise ValueError(f"eta must be > 0, got {eta}")
    rw, rl = (torch.as_tensor(r, dtype=chosen_logp.dtype, device=chosen_logp.device)
              for r in (chosen_reward, rejected_reward))
    check_pairs(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, rw, rl,
                names=("chosen_logp", "rejected_logp", "ref_chosen_logp", "ref_rejected_logp", "chosen_reward",
                       "rejected_reward"))
    ratio = (chosen_logp - ref_chosen_logp) - (rejected_logp - ref_rejected_logp)
    reg_diff = ratio - eta * (rw.detach() - rl.detach())
    loss = (reg_diff ** 2).mean()
    metrics = dpo_metrics(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, 1.0)
    metrics["refuel/sign_align"] = float((ratio.detach() > 0).float().mean())
    metrics["refuel/reward_gap"] = float((rw - rl).mean())
    return loss, metrics


# ---------------------------------------------------------------------------------------------- Direct Advantage PO


def step_advantages(values: torch.Tensor, next_values: torch.Tensor) -> torch.Tensor:
    """A(s, a) = V(s + a) - V(s) from a pre-trained critic's values before and after each step (detached)."""
    check_pairs(values, next_values, names=("values", "next_values"))
    return (next_values - values).detach()


DAPO_STEP_LOGS = {
    "dapo_step/log_ratio": ("Direct-Advantage-PO: mean beta * log(pi/pi_ref) of the steps, regressed onto A(s, a).",
                            "0 at step 0, then following dapo_step/advantage, its regression target (below 0.01 in "
                            "size on the smoke run). Much larger than the advantages: lr too high or beta too small."),
    "dapo_step/advantage": ("Direct-Advantage-PO: mean Monte Carlo advantage V(s+a) - V(s) of the steps.",
                            "Data, not a training signal: steps of fixed offline responses, A in [-1, 1] from 4 "
                            "rollouts per state, averaging near 0 (-0.11 to 0.08 on the smoke run)."),
    "dapo_step/sign_agreement": ("Direct-Advantage-PO: share of steps (A != 0) whose log-ratio has the sign of A.",
                                 "0 at step 0 (log-ratios are exactly 0), rising towards 1 as each step's log-ratio "
                                 "takes the sign of its advantage (0.83 after 10 smoke steps). None when every A is "
                                 "0."),
}


@registry.preference(
    "direct-advantage-po", layout="one",
    title="Improving Multi-Step Reasoning Abilities of Large Language Models with Direct Advantage Policy "
          "Optimization",
    summary="Offline step-level regression of beta * log(pi/pi_ref) of each sampled reasoning step onto its "
            "advantage V(s+a) - V(s) from a separately pre-trained critic (no co-training). Not ByteDance DAPO.",
    equation=r"L = \mathbb{E}_{(s,a)}\big[(\beta\log\frac{\pi_\theta(a|s)}{\pi_{ref}(a|s)} - A(s,a))^2\big],\ "
             r"A(s,a) = V(s\oplus a) - V(s)", logs=DAPO_STEP_LOGS)
def direct_advantage_po(step_logp, ref_step_logp, advantages, *, beta=0.1, mask=None):
    r"""Direct Advantage Policy Optimization (Liu et al. 2024), step-level actor loss.

    Inputs (not pairs: the slot is an offline step-level `policy_loss`): `step_logp`, `ref_step_logp` —
    log-probs of each sampled step a given its state s, summed over the step's tokens (e.g.
    `seq_logp(token_logp, step_mask)`), any shape ([N] steps, or [B, S] steps per solution with `mask`
    [B, S] marking real steps); `advantages` of the same shape: A(s, a) = V(s + a) - V(s) from the
    pre-trained critic (`step_advantages`), treated as constants.

    Reading (catalog `partial`: exact normalisation/baseline terms `unverified`): the squared error above,
    averaged over (masked) steps. Its minimiser is log(pi/pi_ref) = A/beta on every sampled step, the
    KL-regularised optimum pi* ∝ pi_ref exp(A/beta) taking the log-partition as 0 (exact when A has zero
    mean-exp under pi_ref; the critic's A is ~zero-mean for pi_ref's own steps). beta = 0.1 is a workbench
    default (`unverified`).
    Metrics: `dapo_step/log_ratio` (mean beta log pi/pi_ref), `dapo_step/advantage` (mean A),
    `dapo_step/sign_agreement` (fraction of steps with sign(log-ratio) == sign(A), A != 0).
    """
    check_beta(beta)
    A = torch.as_tensor(advantages, dtype=step_logp.dtype, device=step_logp.device)
    check_pairs(step_logp, ref_step_logp, A, names=("step_logp", "ref_step_logp", "advantages"))
    if mask is None:
        mask = torch.ones_like(step_logp)
    elif mask.shape != step_logp.shape:
        raise ValueError(f"mask has shape {tuple(mask.shape)} but step_logp has {tuple(step_logp.shape)}")
    keep = mask != 0
    if not bool(keep.any()):
        raise ValueError("mask is all zero: no reasoning step to train on")
    log_ratio = beta * (step_logp - ref_step_logp)
    sq = torch.where(keep, (log_ratio - A.detach()) ** 2, torch.zeros_like(log_ratio))
    loss = sq.sum() / keep.sum()
    with torch.no_grad():
        lr, a = log_ratio[keep], A[keep]
        nz = a != 0
        metrics = {"dapo_step/log_ratio": float(lr.mean()), "dapo_step/advantage": float(a.mean()),
                   "dapo_step/sign_agreement": float((torch.sign(lr[nz]) == torch.sign(a[nz])).float().mean())
                   if bool(nz.any()) else float("nan")}
    return loss, metrics
