"""Game-theoretic (self-play) preference objectives: sppo, inpo, nash-mp, online-dpo, spo-minimax.

All but `spo-minimax` follow the preference contract (workbench/preference/base.py):

    fn(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, *, beta=..., **hp) -> (loss, metrics)

with per-sequence SUMMED log-probs [B] and the loss the mean over pairs. What "ref" means differs by method
and is stated in each docstring: SPPO's anchor is the previous iterate π_t; INPO and Nash-MP take both the
fixed π_ref (`ref_*`) and the previous iterate / prox centre (`prev_*`).

`spo-minimax` is a reward, not a loss: `spo_minimax(preferences [.., N, N]) -> (rewards, metrics)` is its math, and
the registered component is the reward shaping `spo-minimax` (workbench/rewards/shaping.py) that calls it.

Exact dynamics of every method on a finite response set (softmax policy over K responses, exact expectations
instead of samples) live in `workbench.preference.games`; the tests use them to check the fixed points.

Readings chosen where the catalog says partial / unverified
-----------------------------------------------------------
- inpo: the catalog's first parameterization (`secondary`): h_t with coefficients τ/η, (η − τ)/η and target
  1/(2η); `beta` is η (the contract's β slot; the INPO/IPO regularization strength), default η = 7.5e-3,
  τ = 2.5e-3. τ ∈ [0, η] (the endpoints are the catalog's limit checks). The population minimizer over pairs
  y, y' ~ π_t labelled by the oracle is exactly the OMD step π_{t+1} ∝ π_t^{1−τ/η} π_ref^{τ/η} exp(P(y ≻ π_t)/η).
- nash-mp: the catalog's mirror-prox reading (`unverified`). Each prox step
      log π ∝ [log π^k + ηβ log π_ref + η P(y ≻ opponent)] / (1 + ηβ)
  is learned as an INPO-style regression: pairs drawn from the OPPONENT (π^k for the half step, π^{k+½} for
  the full step), labelled by the oracle, prox centre π^k passed as `prev_*`:
      h = log π(y_w)/π(y_l) − κ log π_ref(y_w)/π_ref(y_l) − (1 − κ) log π^k(y_w)/π^k(y_l),  κ = ηβ/(1 + ηβ),
      L = (h − η/(2(1 + ηβ)))².
  Its population minimizer is that closed form (IPO's identity: regressing a pairwise margin onto c with
  oracle labels on pairs from μ gives margins 2c·(P(y ≻ μ) − P(y' ≻ μ))). It equals `inpo` with
  η' = 1/η + β, τ' = β. Defaults β = 0.1, η = 1.0 are placeholders (no reference implementation located).
- online-dpo: the loss piece only — `dpo` (loss_type "sigmoid") or `ipo` (loss_type "ipo") looked up in the
  registry. Pair generation and judging belong to the rollout side (the `sampled-pairs` source, every step); `geometric_mixture` is TRL Nash-MD's sampling distribution. The XPO exploration term and the
  Nash-MD loss are not implemented.
- spo-minimax: r_i = (1/(N − 1)) Σ_{j≠i} P(ξ_i ≻ ξ_j) (`unverified` normalization, "proportion of wins";
  a tie judgment counts as 0.5, so ties are expressed by passing 0.5); `include_self=True` gives SPPO's
  compute_prob convention, the mean over all N with P(ξ_i ≻ ξ_i) = ½.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from workbench import registry
from workbench.preference.base import TRL_LOGS, check_pairs, dpo_metrics
from workbench.preference.pairwise import DPO_LOGS, IPO_LOGS

SPPO_LOSS_TYPES = ("sppo", "sppo_single", "sppo_hard")
ONLINE_DPO_LOSS_TYPES = {"sigmoid": "dpo", "ipo": "ipo"}


def _as_like(x, like: torch.Tensor, name: str, lo: float | None = None, hi: float | None = None) -> torch.Tensor:
    """Per-pair side input as a tensor shaped like `like`; finite and inside [lo, hi]; ValueError otherwise."""
    if x is None:
        raise ValueError(f"{name} is required (one value per pair, shape {tuple(like.shape)})")
    t = torch.as_tensor(x, dtype=like.dtype, device=like.device)
    if t.shape != like.shape:
        raise ValueError(f"{name} has shape {tuple(t.shape)} but the log-probs have {tuple(like.shape)}: "
                         "one value per pair")
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} has NaN/inf entries")
    if (lo is not None and bool((t < lo).any())) or (hi is not None and bool((t > hi).any())):
        raise ValueError(f"{name} must lie in [{lo}, {hi}] (a probability); got min {float(t.min())}, "
                         f"max {float(t.max())}")
    return t


# ---------------------------------------------------------------------------------------------- sppo


SPPO_LOGS = {
    "sppo/target_chosen": ("SPPO: mean regression target eta * (win rate - 1/2) of the chosen responses.",
                           "Between 0 and eta/2 = 5 (beta = 0.1), set by the data, not the policy: it falls towards "
                           "0 as more of each group is right and the best answer wins fewer comparisons."),
    "sppo/target_rejected": ("SPPO: mean regression target of the rejected responses (negative when they lose).",
                             "Between -eta/2 = -5 and 0 (about -1 early on the smoke run); it falls towards -5 as "
                             "most of each group becomes right and the rejected answer loses to almost every sample."),
}


@registry.preference(
    "sppo", title="Self-Play Preference Optimization for Language Model Alignment",
    summary="square loss of each response's log-ratio to the previous iterate π_t onto η(P̂(y ≻ π_t) − ½), "
            "η = 1/β; chosen and rejected are regressed separately (uclaml/SPPO loss_type='sppo'). "
            "'sppo_single' uses P(y_w ≻ y_l) with ± targets, 'sppo_hard' is TRL's hard-label form.",
    equation=r"\mathcal{L} = \tfrac12\Big[\Big(\log\frac{\pi(y_w)}{\pi_t(y_w)} - \frac{\hat P_w - \frac12}{\beta}"
             r"\Big)^2 + \Big(\log\frac{\pi(y_l)}{\pi_t(y_l)} - \frac{\hat P_l - \frac12}{\beta}\Big)^2\Big],"
             r"\quad \hat P = \hat P(y \succ \pi_t)", logs={**TRL_LOGS, **SPPO_LOGS},
    choices={"loss_type": SPPO_LOSS_TYPES})
def sppo(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, *, beta=1e-3, loss_type="sppo",
         chosen_winrate=None, rejected_winrate=None, pair_prob=None):
    r"""SPPO: per-response regression of a = log π/π_t(y_w), b = log π/π_t(y_l) onto η(P̂ − ½), η = 1/β.

    `ref_*` are the log-probs of the PREVIOUS ITERATE π_t (SPPO's moving reference), not a fixed π_ref.
    loss_type (uclaml/SPPO `sppo/trainer.py::sppo_loss`, TRL `dpo_trainer.py`):
      - "sppo" (default): ½[(a − (P̂_w − ½)/β)² + (b − (P̂_l − ½)/β)²] with `chosen_winrate` P̂_w and
        `rejected_winrate` P̂_l = P̂(y ≻ π_t) ∈ [0, 1], [B] (uclaml `chosen_probs_win` / `chosen_probs_lose`:
        mean over the K samples of P(y ≻ y_j), PairRM's σ(s − s_j)).
      - "sppo_single": ½[(a − (p − ½)/β)² + (b + (p − ½)/β)²] with `pair_prob` p = P(y_w ≻ y_l) [B].
      - "sppo_hard": (a − ½/β)² + (b + ½/β)² (TRL; P̂_w = 1, P̂_l = 0 and no ½ factor: twice "sppo" there).
    Optimum: a = η(P̂_w − ½), b = η(P̂_l − ½) — a response with win rate ½ keeps its probability. Unlike DPO the
    chosen log-likelihood rises and the rejected one falls individually. β = 1e-3 (η = 1000) is the paper's
    value for summed LLM log-probs. Metrics: TRL's rewards/* (β·log π/π_t), `sppo/target_chosen`,
    `sppo/target_rejected` (mean targets, log-ratio units).
    """
    if not beta > 0:
        raise ValueError(f"sppo beta must be > 0 (η = 1/β), got {beta}")
    if loss_type not in SPPO_LOSS_TYPES:
        raise ValueError(f"sppo loss_type must be one of {SPPO_LOSS_TYPES}, got {loss_type!r}")
    check_pairs(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp)
    a, b = chosen_logp - ref_chosen_logp, rejected_logp - ref_rejected_logp
    eta = 1.0 / beta
    if loss_type == "sppo":
        if pair_prob is not None:
            raise ValueError("sppo loss_type='sppo' reads chosen_winrate/rejected_winrate, not pair_prob "
                             "(use loss_type='sppo_single')")
        pw = _as_like(chosen_winrate, a, "chosen_winrate", 0.0, 1.0)
        pl = _as_like(rejected_winrate, a, "rejected_winrate", 0.0, 1.0)
        t_w, t_l = eta * (pw - 0.5), eta * (pl - 0.5)
        per_pair = 0.5 * ((a - t_w) ** 2 + (b - t_l) ** 2)
    elif loss_type == "sppo_single":
        if chosen_winrate is not None or rejected_winrate is not None:
            raise ValueError("sppo loss_type='sppo_single' reads pair_prob, not chosen/rejected_winrate")
        p = _as_like(pair_prob, a, "pair_prob", 0.0, 1.0)
        t_w = eta * (p - 0.5)
        t_l = -t_w
        per_pair = 0.5 * ((a - t_w) ** 2 + (b - t_l) ** 2)
    else:
        if chosen_winrate is not None or rejected_winrate is not None or pair_prob is not None:
            raise ValueError("sppo loss_type='sppo_hard' uses hard labels (P̂_w = 1, P̂_l = 0) and reads no "
                             "win rates")
        t_w, t_l = torch.full_like(a, 0.5 * eta), torch.full_like(a, -0.5 * eta)
        per_pair = (a - t_w) ** 2 + (b - t_l) ** 2
    metrics = dpo_metrics(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, beta)
    metrics["sppo/target_chosen"] = float(t_w.mean())
    metrics["sppo/target_rejected"] = float(t_l.mean())
    return per_pair.mean(), metrics


# --------------------------------------------------------------------------------- inpo and nash-mp


def _prev(prev_chosen_logp, prev_rejected_logp, ref_chosen_logp, ref_rejected_logp, method: str):
    if (prev_chosen_logp is None) != (prev_rejected_logp is None):
        raise ValueError(f"{method} needs both prev_chosen_logp and prev_rejected_logp or neither "
                         "(neither: first iteration, π_0 = π_ref)")
    if prev_chosen_logp is None:
        return ref_chosen_logp, ref_rejected_logp
    return prev_chosen_logp, prev_rejected_logp


def _anchored_regression(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, prev_chosen_logp,
                         prev_rejected_logp, ref_coef: float, target: float):
    """(h − target)² per pair, h = log π(y_w)/π(y_l) − c·log π_ref(y_w)/π_ref(y_l) − (1 − c)·log π_t(y_w)/π_t(y_l):
    IPO with the geometric mixture π_ref^c π_t^(1−c) as reference."""
    check_pairs(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, prev_chosen_logp, prev_rejected_logp,
                names=("chosen_logp", "rejected_logp", "ref_chosen_logp", "ref_rejected_logp", "prev_chosen_logp",
                       "prev_rejected_logp"))
    h = ((chosen_logp - rejected_logp) - ref_coef * (ref_chosen_logp - ref_rejected_logp)
         - (1.0 - ref_coef) * (prev_chosen_logp - prev_rejected_logp))
    return (h - target) ** 2, h


INPO_LOGS = {
    "inpo/h": ("INPO: mean log-ratio margin h_t against the mixture of the reference and the previous iterate.",
               "0 at step 0; climbs towards inpo/target (5) within each 5-step iteration and drops at each boundary, "
               "where pi_t becomes the policy, to tau/eta = 0.3 of the margin over pi_ref. Flat at 0: no learning."),
    "inpo/target": ("INPO: the regression target 1/(2 eta) that h_t is pulled towards.",
                    "Constant 1/(2 eta): 5 with the recipe's beta (eta) = 0.1. Read inpo/h against it."),
}


@registry.preference(
    "inpo", title="Iterative Nash Policy Optimization: Aligning LLMs with General Preferences via No-Regret Learning",
    summary="IPO-like regression whose population minimizer is the online-mirror-descent step "
            "π_{t+1} ∝ π_t^{1−τ/η} π_ref^{τ/η} exp(P(y ≻ π_t)/η): reference = geometric mixture of π_ref and the "
            "previous iterate, target 1/(2η); β is η.",
    equation=r"\mathcal{L} = \Big(h_t - \frac{1}{2\eta}\Big)^2,\ h_t = \log\frac{\pi(y_w)}{\pi(y_l)} - "
             r"\frac{\tau}{\eta}\log\frac{\pi_{ref}(y_w)}{\pi_{ref}(y_l)} - \frac{\eta-\tau}{\eta}"
             r"\log\frac{\pi_t(y_w)}{\pi_t(y_l)}", logs={**TRL_LOGS, **INPO_LOGS})
def inpo(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, *, beta=7.5e-3, tau=2.5e-3,
         prev_chosen_logp=None, prev_rejected_logp=None):
    r"""INPO: L = (h_t − 1/(2η))², η = `beta`, pairs y, y' ~ π_t labelled (y_w, y_l) by the preference oracle.

    h_t = log π(y_w)/π(y_l) − (τ/η)·log π_ref(y_w)/π_ref(y_l) − ((η − τ)/η)·log π_t(y_w)/π_t(y_l).
    `ref_*`: the fixed reference π_ref; `prev_*`: the previous iterate π_t (None for both: first iteration,
    π_0 = π_ref). 0 ≤ τ ≤ η: τ = 0 is online IPO anchored at π_t, τ = η is IPO anchored at π_ref, both with
    target 1/(2η). Defaults η = 7.5e-3, τ = 2.5e-3 (`secondary`). The population minimizer is the OMD step
    π_{t+1} ∝ π_t^{1−τ/η} π_ref^{τ/η} exp(P(y ≻ π_t)/η), whose fixed point is the τ-regularized Nash
    π ∝ π_ref exp(P(y ≻ π)/τ). Metrics: TRL's rewards/* (β·log π/π_ref), `inpo/h` = mean h_t,
    `inpo/target` = 1/(2η).
    """
    eta, tau = float(beta), float(tau)
    if not eta > 0:
        raise ValueError(f"inpo beta (η) must be > 0, got {beta}")
    if not 0.0 <= tau <= eta:
        raise ValueError(f"inpo needs 0 <= tau <= beta (τ ≤ η: the exponent 1 − τ/η of π_t must stay in [0, 1]); "
                         f"got tau={tau}, beta={eta}")
    prev_w, prev_l = _prev(prev_chosen_logp, prev_rejected_logp, ref_chosen_logp, ref_rejected_logp, "inpo")
    target = 1.0 / (2.0 * eta)
    per_pair, h = _anchored_regression(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, prev_w,
                                       prev_l, tau / eta, target)
    metrics = dpo_metrics(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, eta)
    metrics["inpo/h"] = float(h.detach().mean())
    metrics["inpo/target"] = target
    return per_pair.mean(), metrics


NASH_MP_LOGS = {
    "nash_mp/h": ("Nash-MP: mean log-ratio margin against the mixture of the reference and the prox centre.",
                  "0 at step 0; climbs towards nash_mp/target (1.67) within each 5-step iteration and drops at each "
                  "boundary, where the prox centre becomes the policy, to 1/3 of the margin over pi_ref."),
    "nash_mp/target": ("Nash-MP: the regression target eta / (2 (1 + eta beta)).",
                       "Constant eta / (2 (1 + eta beta)): 5/3 with the recipe's beta = 0.1 and eta = 5. Read "
                       "nash_mp/h against it."),
}


@registry.preference(
    "nash-mp", title="Accelerating Nash Learning from Human Feedback via Mirror Prox",
    summary="one mirror-prox (extragradient) step of the β-regularized preference game as an IPO-style regression: "
            "pairs from the opponent (π^k, then π^{k+½}), prox centre π^k as prev_*; minimizer "
            "log π ∝ [log π^k + ηβ log π_ref + η P(y ≻ opp)]/(1 + ηβ) (reading of an unverified update).",
    equation=r"\mathcal{L} = \Big(h - \frac{\eta}{2(1+\eta\beta)}\Big)^2,\ h = \log\frac{\pi(y_w)}{\pi(y_l)} - "
             r"\kappa\log\frac{\pi_{ref}(y_w)}{\pi_{ref}(y_l)} - (1-\kappa)\log\frac{\pi^k(y_w)}{\pi^k(y_l)},\ "
             r"\kappa = \frac{\eta\beta}{1+\eta\beta}", logs={**TRL_LOGS, **NASH_MP_LOGS})
def nash_mp(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, *, beta=0.1, eta=1.0,
            prev_chosen_logp=None, prev_rejected_logp=None):
    r"""Nash-MP prox step (reading, see the module docstring): L = (h − η/(2(1 + ηβ)))².

    h = log π(y_w)/π(y_l) − κ·log π_ref(y_w)/π_ref(y_l) − (1 − κ)·log π^k(y_w)/π^k(y_l), κ = ηβ/(1 + ηβ).
    β: KL-regularization of the game (β → ∞ keeps π = π_ref); η: mirror-prox step size. `ref_*` the fixed
    π_ref; `prev_*` the prox centre π^k (None for both: π^k = π_ref). Pairs must be drawn from the opponent —
    π^k for the half step, π^{k+½} for the full step — and labelled by the oracle; the population minimizer is
    then log π ∝ [log π^k + ηβ log π_ref + η P(y ≻ opponent)]/(1 + ηβ). Identical to `inpo` with
    beta = 1/η + β, tau = β. Defaults β = 0.1, η = 1.0: placeholders (no reference implementation).
    Metrics: TRL's rewards/* (β·log π/π_ref), `nash_mp/h`, `nash_mp/target`.
    """
    beta, eta = float(beta), float(eta)
    if not beta >= 0 or not eta > 0 or beta == float("inf") or eta == float("inf"):
        raise ValueError(f"nash-mp needs finite beta >= 0 and eta > 0, got beta={beta}, eta={eta}")
    prev_w, prev_l = _prev(prev_chosen_logp, prev_rejected_logp, ref_chosen_logp, ref_rejected_logp, "nash-mp")
    kappa = eta * beta / (1.0 + eta * beta)
    target = eta / (2.0 * (1.0 + eta * beta))
    per_pair, h = _anchored_regression(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, prev_w,
                                       prev_l, kappa, target)
    metrics = dpo_metrics(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, beta)
    metrics["nash_mp/h"] = float(h.detach().mean())
    metrics["nash_mp/target"] = target
    return per_pair.mean(), metrics


# ----------------------------------------------------------------------------------------- online-dpo


@registry.preference(
    "online-dpo", title="Direct Language Model Alignment from Online AI Feedback",
    summary="dpo (loss_type='sigmoid') or ipo (loss_type='ipo') on pairs sampled from the CURRENT policy and judged "
            "online (the `sampled-pairs` source draws them every step), π_ref fixed.",
    equation=r"\mathcal{L} = -\log\sigma(\beta\Delta)\ \text{or}\ \Big(\Delta - \frac{1}{2\beta}\Big)^2,\quad "
             r"y_1, y_2 \sim \pi_\theta(\cdot|x),\ (y_w, y_l) = \mathrm{judge}(y_1, y_2)",
    logs={**TRL_LOGS, **DPO_LOGS, **IPO_LOGS}, choices={"loss_type": tuple(ONLINE_DPO_LOSS_TYPES)})
def online_dpo(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, *, beta=0.1, loss_type="sigmoid",
               **loss_kw):
    r"""Online DPO loss piece: the registered `dpo` / `ipo` applied to on-policy, online-judged pairs.

    loss_type "sigmoid" → `dpo`, "ipo" → `ipo` (extra keywords, e.g. ipo's `length_average`, are passed on).
    Online DPO's pairs come from the current policy: the `sampled-pairs` data source samples and judges them at
    every step (workbench/rollout/preference_data.py). With a fixed offline pair set the value is exactly `dpo`'s.
    The rollout side samples two responses per prompt (TRL Nash-MD: from `geometric_mixture`). Metrics: those of
    the wrapped loss.
    """
    if loss_type not in ONLINE_DPO_LOSS_TYPES:
        raise ValueError(f"online-dpo loss_type must be one of {tuple(ONLINE_DPO_LOSS_TYPES)}, got {loss_type!r}")
    base = registry.get("preference", ONLINE_DPO_LOSS_TYPES[loss_type])
    loss, metrics = base.fn(chosen_logp, rejected_logp, ref_chosen_logp, ref_rejected_logp, beta=beta, **loss_kw)
    return loss, metrics


def geometric_mixture(policy_logits: torch.Tensor, ref_logits: torch.Tensor, mixture_coef: float = 0.5):
    r"""Nash-MD's sampling distribution per token: log_softmax((1 − α)·policy_logits + α·ref_logits), α = mixture_coef.

    TRL `trl/experimental/nash_md` `GeometricMixtureWrapper` (default α = 0.5). α = 0 samples from the policy
    only, α = 1 from the reference only. Returns log-probs over the last dimension.
    """
    if not 0.0 <= mixture_coef <= 1.0:
        raise ValueError(f"mixture_coef must lie in [0, 1], got {mixture_coef}")
    if policy_logits.shape != ref_logits.shape:
        raise ValueError(f"policy_logits {tuple(policy_logits.shape)} and ref_logits {tuple(ref_logits.shape)} "
                         "must have the same shape")
    return F.log_softmax((1.0 - mixture_coef) * policy_logits + mixture_coef * ref_logits, dim=-1)


# ---------------------------------------------------------------------------------------- spo-minimax


def preferences_from_scores(scores: torch.Tensor) -> torch.Tensor:
    """A judge from verifier scores [G, N]: P(ξ_i ≻ ξ_j) = 1 if s_i > s_j, ½ if equal, 0 if lower → [G, N, N].

    Transitive by construction; an intransitive judge (e.g. `games.rock_paper_scissors`) plugs into
    `spo_minimax` the same way."""
    s = scores.double()
    return (s[:, :, None] > s[:, None, :]).double() + 0.5 * (s[:, :, None] == s[:, None, :]).double()


# What `spo_minimax` returns to log (the spo-minimax reward shaping logs it).
SPO_MINIMAX_LOGS = {
    "spo/reward_mean": ("SPO: mean win-rate reward of the samples (exactly 1/2 for an antisymmetric judge).",
                        "Exactly 0.5 with the verifier as judge (P(i > j) + P(j > i) = 1), so reward/mean reads 0.5 "
                        "too. Anything else: an inconsistent judge, see spo/antisymmetry_gap."),
    "spo/reward_std": ("SPO: spread of the win-rate rewards (0 when every group's samples tie).",
                       "Above 0 while groups disagree (at most 1/3 with 0/1 rewards and G = 4); it falls towards 0 "
                       "as more groups tie, as frac_zero_std_groups rises. At 0 no learning signal is left."),
    "spo/antisymmetry_gap": ("SPO: largest |P(i > j) + P(j > i) - 1| of the judge (0 for a consistent judge).",
                             "Exactly 0 with the verifier as judge (ties count 1/2 both ways). Above 0 only with a "
                             "stochastic or inconsistent judge; spo/reward_mean then leaves 0.5 as well."),
}


def spo_minimax(preferences, *, include_self=False):
    r"""SPO win-rate reward r_i = (1/(N − 1))·Σ_{j≠i} P(ξ_i ≻ ξ_j) from a group's pairwise judgments.

    `preferences` [N, N] or [G, N, N] (one matrix per context): entry (i, j) = P(ξ_i ≻ ξ_j) or a sampled label
    (1 win, 0 loss, 0.5 tie), in [0, 1]; the diagonal is ignored. The judge may be intransitive, stochastic and
    need not satisfy P + Pᵀ = 1 (`spo/antisymmetry_gap` reports the largest |P_ij + P_ji − 1|).
    include_self=True: mean over all N with P(ξ_i ≻ ξ_i) = ½ (SPPO's compute_prob convention) =
    ((N − 1)·r_i + ½)/N. Returns (rewards [.., N] float, metrics) — a reward for `grpo`/`rloo`/PPO, not a loss.
    With P + Pᵀ = 1 the group-mean reward is exactly ½. Metrics: `spo/reward_mean`, `spo/reward_std`,
    `spo/antisymmetry_gap`.
    """
    P = torch.as_tensor(preferences)
    if not P.is_floating_point():
        P = P.to(torch.float64)
    if P.dim() not in (2, 3) or P.shape[-1] != P.shape[-2]:
        raise ValueError(f"spo-minimax preferences must be [N, N] or [G, N, N] pairwise judgments, got shape "
                         f"{tuple(P.shape)}")
    N = P.shape[-1]
    if N < 2:
        raise ValueError(f"spo-minimax needs N >= 2 trajectories per context to compare, got N={N}")
    if not bool(torch.isfinite(P).all()):
        raise ValueError("spo-minimax preferences have NaN/inf entries")
    eye = torch.eye(N, dtype=torch.bool, device=P.device)
    off = P.masked_fill(eye, 0.0)
    if bool((off < 0).any()) or bool((off > 1).any()):
        raise ValueError(f"spo-minimax preferences must lie in [0, 1] (probabilities or 0/0.5/1 labels); got min "
                         f"{float(off.min())}, max {float(off.max())}")
    rewards = off.sum(-1) / (N - 1)
    if include_self:
        rewards = ((N - 1) * rewards + 0.5) / N
    with torch.no_grad():
        gap = (off + off.transpose(-1, -2) - 1.0).masked_fill(eye, 0.0).abs().max()
        metrics = {"spo/reward_mean": float(rewards.mean()),
                   "spo/reward_std": float(rewards.std(unbiased=False)),
                   "spo/antisymmetry_gap": float(gap)}
    return rewards, metrics
