"""LiPO: listwise preference optimization with LambdaLoss pair weights, and the list/pair building blocks
shared by the other modules of this family (`as_list`, `pair_loss`).

List convention (every listwise objective here): the list of K responses to one prompt is the columns of
`chosen_logp` followed by the columns of `rejected_logp` ([B] counts as one column), so

    fn(logps[B, K], None, ref_logps[B, K], None, ...)       a whole list in `chosen_logp`, column 0 the best
    fn(chosen[B], rejected[B], ref_chosen[B], ref_rejected[B])   a pair: K = 2, column 0 = chosen

give the same [B, K] list. Without labels the column order is the ranking (column 0 best, strictly
decreasing). Log-probs are per-sequence sums over response tokens, as everywhere in this family.
"""
from __future__ import annotations


import torch
import torch.nn.functional as F

from workbench import registry
from workbench.preference.base import TRL_LOGS, check_beta, check_pairs, preference_metrics, smoothed_logistic


def as_list(first: torch.Tensor, rest: torch.Tensor | None = None) -> torch.Tensor:
    """[B, K] list from `first` ([B] or [B, K1]) followed by `rest` ([B], [B, K2] or None)."""
    if first is None:
        raise ValueError("the list needs at least its first column(s) (chosen_logp)")
    cols = [first if first.dim() == 2 else first.reshape(-1, 1)]
    if rest is not None:
        cols.append(rest if rest.dim() == 2 else rest.reshape(-1, 1))
    for c in cols:
        if c.dim() != 2:
            raise ValueError(f"list inputs must be [B] or [B, K]; got shape {tuple(c.shape)}")
    if len(cols) == 2 and cols[0].shape[0] != cols[1].shape[0]:
        raise ValueError(f"chosen has {cols[0].shape[0]} rows but rejected has {cols[1].shape[0]}")
    return torch.cat(cols, dim=-1) if len(cols) == 2 else cols[0]


def check_list(logps: torch.Tensor, ref_logps: torch.Tensor, name: str = "list") -> None:
    check_pairs(logps, ref_logps, names=(f"{name} log-probs", f"reference {name} log-probs"))
    if logps.shape[-1] < 2:
        raise ValueError(f"a {name} needs at least 2 responses per prompt; got K = {logps.shape[-1]}")


PAIR_LOSS_TYPES = ("sigmoid", "ipo")  # `pair_loss`: DPO's logistic loss, IPO's squared loss
LIPO_WEIGHTS = ("lambda", "constant")  # LiPO-lambda's NDCG pair weights, or 1 (pairwise)


def pair_loss(logits: torch.Tensor, beta: float, loss_type: str = "sigmoid",
              label_smoothing: float = 0.0) -> torch.Tensor:
    """Per-pair loss of the margin `logits` = u_w - u_l (log-ratio difference), unreduced.

    sigmoid (DPO): -(1 - eps) log sigma(beta z) - eps log sigma(-beta z)   (eps = label_smoothing, cDPO)
    ipo (sum convention): (z - 1/(2 beta))^2
    """
    if loss_type == "sigmoid":
        return smoothed_logistic(beta * logits, label_smoothing)
    if loss_type == "ipo":
        return (logits - 1 / (2 * beta)) ** 2
    raise ValueError(f"unknown loss_type {loss_type!r}; choose 'sigmoid' (DPO) or 'ipo'")


# ---------------------------------------------------------------------------------------------- LiPO


def model_ranks(scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """1-based rank tau of each item by the (detached) model score, highest first.

    Ties in the score (e.g. every score is 0 at initialisation, pi = pi_ref) are broken by the label,
    highest first, then by column: the order is a function of (score, label) pairs only, so permuting a
    list permutes its ranks, and tied items with equal labels are interchangeable.
    """
    by_label = torch.argsort(-labels, dim=-1, stable=True)
    by_score = torch.argsort(-scores.gather(-1, by_label), dim=-1, stable=True)
    order = by_label.gather(-1, by_score)                    # order[b, r] = item at 0-based rank r
    ranks = torch.empty_like(order)
    positions = torch.arange(1, order.shape[-1] + 1, device=order.device).expand_as(order)
    return ranks.scatter_(-1, order, positions)


def lambda_weights(labels: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    """LambdaLoss (NDCG) pair weights Delta_ij = |G_i - G_j| |1/D(tau_i) - 1/D(tau_j)|, [B, K, K].

    G = 2^psi - 1, D(tau) = log2(1 + tau), tau = model rank (see `model_ranks`). Symmetric, 0 on the
    diagonal and for equal labels. Computed without gradient.
    """
    with torch.no_grad():
        tau = model_ranks(scores.detach(), labels).to(labels.dtype)
        gain = torch.pow(2.0, labels) - 1
        inv_discount = 1 / torch.log2(1 + tau)
        return (gain[:, :, None] - gain[:, None, :]).abs() * (inv_discount[:, :, None] - inv_discount[:, None, :]).abs()


def ndcg(labels: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    """NDCG of the model ranking per list ([B]); NaN for lists whose ideal DCG is 0 (all gains 0)."""
    with torch.no_grad():
        gain = torch.pow(2.0, labels) - 1
        tau = model_ranks(scores.detach(), labels).to(labels.dtype)
        dcg = (gain / torch.log2(1 + tau)).sum(-1)
        ideal_pos = torch.arange(2, labels.shape[-1] + 2, dtype=labels.dtype, device=labels.device)
        ideal = (gain.sort(-1, descending=True).values / torch.log2(ideal_pos)).sum(-1)
        return torch.where(ideal > 0, dcg / ideal.clamp(min=1e-300), torch.full_like(ideal, float("nan")))


LIPO_LOGS = {
    "lipo/ndcg": ("LiPO: NDCG of the policy's implicit-reward ranking against the verifier's ranking (1 = perfect).",
                  "Exactly 1 at step 0 (tied scores are broken by the label); 0.55 (reversed) to 1 for K = 4, 0.75 "
                  "for a random order. Falling towards 0.75: the implicit rewards no longer follow the ranking."),
    "lipo/pair_accuracy": ("LiPO: share of ordered pairs in the lists whose implicit rewards are in the right order.",
                           "0 at step 0 (all scores tie and the test is strict), then rising towards 1 over the 6 "
                           "ordered pairs per list. Stuck near 0.5: the policy does not rank the lists."),
    "lipo/pairs_per_list": ("LiPO: ordered (non-tied) pairs per list that carry a loss term.",
                            "Constant K (K - 1)/2 = 6 with the recipe's K = 4 strictly ranked responses. Fewer only "
                            "with tied labels, which carry no term."),
}


@registry.preference(
    "lipo", layout="list", title="LiPO: Listwise Preference Optimization through Learning-to-Rank",
    summary="Pairwise logistic loss over every ordered pair of a ranked list of K responses, each pair weighted "
            "by its LambdaLoss (NDCG) weight; K = 2 with constant weights is DPO. Inputs [B, K].",
    equation=r"L = -\sum_{\psi_i>\psi_j}\Delta_{ij}\log\sigma(s_i - s_j),\ s_i = \beta\log\frac{\pi(y_i)}"
             r"{\pi_{ref}(y_i)},\ \Delta_{ij} = |G_i - G_j|\,\Big|\frac{1}{D(\tau_i)} - \frac{1}{D(\tau_j)}\Big|,"
             r"\ G = 2^{\psi}-1,\ D(\tau) = \log_2(1+\tau)", logs={**TRL_LOGS, **LIPO_LOGS},
    choices={"weights": LIPO_WEIGHTS})
def lipo(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, *, beta=0.1, labels=None,
         weights="lambda"):
    r"""LiPO-lambda (Liu et al. 2024): listwise preference optimization with LambdaLoss weights.

    Inputs (list convention of this module): the list is `chosen_logp` ([B] or [B, K]) followed by
    `rejected_logp` ([B], [B, K'] or None), likewise for the reference. Extra keyword inputs:
      - `labels` [B, K]: graded preference scores psi (higher is better, e.g. reward-model scores). None:
        psi_i = K - 1 - i, i.e. the columns are already ranked, column 0 the best, no ties.
      - `weights`: "lambda" (LiPO-lambda, the paper's method) or "constant" (Delta = 1 for every ordered
        pair: the plain pairwise-logistic ranking loss; with K = 2 exactly DPO).

    Loss per list: sum over ordered pairs (psi_i > psi_j) of Delta_ij * softplus(-(s_i - s_j)), with
    s_i = beta * (log pi(y_i) - log pi_ref(y_i)); the batch loss is the mean over the B lists (the pair
    sum is not normalised, as in the paper's formula). Delta_ij (see `lambda_weights`) uses the gains
    G = 2^psi - 1 and the discount D(tau) = log2(1 + tau) at the model's current (detached) ranks tau.

    Reading (`unverified` in the catalog; the paper's LambdaLoss form as summarised in its text): gain,
    discount and rank definitions as above, ranks from the detached current scores s.
    Ties: pairs with equal labels get no term (Delta = 0 and excluded), as in learning-to-rank; a list whose
    labels are all equal contributes 0 (it still counts in the batch mean); a batch with no ordered pair at
    all is a ValueError. Ties in the model score (every s_i = 0 at pi = pi_ref) are broken by label, so
    the weights are defined and permutation-invariant from the first step.
    K = 2: the only pair gets Delta = |G_1 - G_2| * (1 - 1/log2 3); with weights="constant" the loss is
    exactly DPO's -log sigma(beta (u_w - u_l)).

    Metrics: TRL names with chosen = the best-labelled and rejected = the worst-labelled response of each
    list, plus `lipo/pair_accuracy` (ordered pairs with s_i > s_j) and `lipo/ndcg` (of the model ranking).
    """
    check_beta(beta)
    logps, ref_logps = as_list(chosen_logp, rejected_logp), as_list(ref_chosen_logp, ref_rejected_logp)
    if logps.shape != ref_logps.shape:
        raise ValueError(f"policy list has shape {tuple(logps.shape)} but reference list has "
                         f"{tuple(ref_logps.shape)}")
    check_list(logps, ref_logps)
    B, K = logps.shape
    if labels is None:
        labels = torch.arange(K - 1, -1, -1, dtype=logps.dtype, device=logps.device).expand(B, K)
    else:
        labels = torch.as_tensor(labels, dtype=logps.dtype, device=logps.device)
        if labels.shape != (B, K):
            raise ValueError(f"labels must have the list's shape {(B, K)}, got {tuple(labels.shape)}")
        if not bool(torch.isfinite(labels).all()):
            raise ValueError("labels contain NaN/inf")
    scores = beta * (logps - ref_logps)
    ordered = labels[:, :, None] > labels[:, None, :]          # [B, K, K]: i strictly preferred to j
    if not bool(ordered.any()):
        raise ValueError("no strictly ordered pair in the batch: every list has all-equal labels (ties carry "
                         "no preference; LiPO needs at least one psi_i > psi_j)")
    if weights == "lambda":
        delta = lambda_weights(labels, scores)
    elif weights == "constant":
        delta = torch.ones(B, K, K, dtype=logps.dtype, device=logps.device)
    else:
        raise ValueError(f"unknown weights {weights!r}; choose 'lambda' (LiPO-lambda) or 'constant' (pairwise)")
    diff = scores[:, :, None] - scores[:, None, :]
    per_pair = torch.where(ordered, delta * F.softplus(-diff), torch.zeros_like(diff))
    loss = per_pair.sum((-1, -2)).mean()

    with torch.no_grad():
        best, worst = labels.argmax(-1, keepdim=True), labels.argmin(-1, keepdim=True)
        metrics = preference_metrics(scores.gather(-1, best)[:, 0], scores.gather(-1, worst)[:, 0],
                                     logps.gather(-1, best)[:, 0], logps.gather(-1, worst)[:, 0])
        metrics["lipo/pair_accuracy"] = float((diff > 0)[ordered].float().mean())
        n = ndcg(labels, scores)
        metrics["lipo/ndcg"] = float(n[~torch.isnan(n)].mean()) if bool((~torch.isnan(n)).any()) else float("nan")
        metrics["lipo/pairs_per_list"] = float(ordered.sum((-1, -2)).to(logps.dtype).mean())
    return loss, metrics
