"""Single-stream Policy Optimization: one response per prompt, a persistent Beta value tracker per prompt as the
baseline, global batch normalization, prioritized prompts.

    p_x          = alpha_x / (alpha_x + beta_x)                    the prompt's success estimate (before this update)
    A_i          = R_i - p_{x_i},  then A <- (A - mean_B A) / (std_B A + 1e-8)     over the whole batch, broadcast
    alpha_x     <- rho_x alpha_x + R,   beta_x <- rho_x beta_x + (1 - R)           after each visit
    rho_x        = clip(2^(-D_x / D_half), rho_min, 0.96),  D_half = 0.06, rho_min = 0.875   (rho="kl")
    D_x          = mean_t |log pi_then(y_t) - log pi_now(y_t)|  on the prompt's response stored at its last visit
                   (first visit: D = 0, so rho = 0.96);  rho="constant": rho = 0.875
    init         N offline samples (N = 8), S of them right: N_init = 1 / (1 - rho_min),
                 alpha_0 = N_init (S + 0.5) / (N + 1),  beta_0 = N_init (N - S + 0.5) / (N + 1);  N = 0: 1/2, 1/2
    sampling     w_x = sqrt(p_x (1 - p_x)) + 0.05, prompts drawn with probability w / sum w

With rho = 1 the tracker is the exact Beta-Bernoulli posterior; rho < 1 forgets old outcomes, faster when the
policy has moved more on the prompt (larger D). The baseline needs no group: G = 1 (a batch of 1024 prompts x 1
response in the paper), and no response gets A = 0 just because its group agreed.

Two components, one state. The tracker lives in the state of the `reward_shaping` component `spo-single`
(`SpoTracker`, kept by the pipeline, checkpointed and restored exactly): at each step it writes p_x (before the
update) into `batch.baseline_rewards` [B], then updates alpha, beta with the step's rewards. The `advantage`
`spo-single` z-scores R - baseline over the batch (it takes any group size; run with group_size 1). The
prioritized sampling is not a pipeline sampler: a sampler sees only its own state, and the tracker is the shaping
component's, so training samples prompts uniformly; `sampling_weights` and `prioritized_sample` implement (and the
tests check) the weighted draw for a sampler that could read the tracker.

Authors' code: verl-project/verl-recipe @ 48ea0a7 (read at 550d42f, the same SPO logic) `spo/spo_ray_trainer.py`:
`RayPPOTrainer._get_spo_rho` (L240-305) and `RayPPOTrainer.fit` (L355-395 offline init and sampling weights,
L530-555 advantage with torch's Bessel `std()` + 1e-8, L658-670 the update); `spo/config/spo_trainer.yaml`
(rho.type kl, clip_lower 0.875, value 0.875, offline_N 8). Readings and departures (ours):
  - timing of D: the code updates the tracker after the actor step, comparing the log-probs stored after the last
    visit's update with those after this step's update. The tracker here updates in the reward-shaping stage,
    before the actor step, and compares the log-probs at the last visit's rollout with those now: the same number
    of policy updates apart, one step earlier at both ends. Both are scored by `ctx.score` at `temperature`.
  - the offline init: the code reads a file of scores of the initial policy for every training prompt. Here
    `offline_values` {prompt: scores} plays that file; a prompt not in it is initialized at its first visit from
    `offline_n` fresh rollouts of the current policy (`ctx.rollout`, environment scores, binarized > 0 as the code).
    N counts the scores given (the code divides by the configured N even for a prompt with fewer scores).
  - several rows of one prompt in a step (G > 1, or a prompt drawn twice): one decay per visit and every row's
    outcome counted, alpha <- rho alpha + sum R; the code keeps only the last copy's update.
  - rewards must lie in [0, 1]: the code adds them unbinarized and relies on its reward being 0/1 (`spo_retool`).
  - prompts absent from the offline file get sampling weight 0 in the code (never drawn); `sampling_weights` gives
    every prompt its weight from its tracker.
  - at most `max_prompts` prompts are tracked (the least recently seen forgotten): a memory bound of ours. Under
    data parallelism each process tracks the prompts it saw (prompt texts are keys).
Logs spo-single/p_hat, spo-single/rho, spo-single/D, spo-single/first_visit_frac and spo-single/n_eff.
"""
from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field, replace

import torch
import torch.nn.functional as F

from workbench import ops, registry
from workbench.advantages.base import broadcast, sequence_rewards
from workbench.batch import RolloutBatch, concat

SPO_TITLE = "Single-stream Policy Optimization"
RHO_TYPES = ("kl", "constant")


# ----------------------------------------------------------------------------- the tracker's math

def offline_init(scores, *, rho_min=0.875) -> tuple[float, float]:
    """(alpha_0, beta_0) from N offline scores (binarized > 0): N_init (S + 1/2) / (N + 1), N_init (N - S + 1/2) /
    (N + 1) with N_init = 1 / (1 - rho_min); (1/2, 1/2) for N = 0."""
    n = len(scores)
    if n == 0:
        return 0.5, 0.5
    right = sum(int(float(s) > 0) for s in scores)
    n_init = 1.0 / (1.0 - rho_min)
    return n_init * (right + 0.5) / (n + 1), n_init * (n - right + 0.5) / (n + 1)


def success_estimate(alpha: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
    """p = alpha / (alpha + beta)."""
    return alpha / (alpha + beta)


def policy_drift(then_logp: torch.Tensor, now_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """D [N] = mean over each row's policy tokens of |log pi_then - log pi_now|."""
    return ops.masked_mean((then_logp.double() - now_logp.double()).abs(), mask.double(), dim=-1)


def forgetting_rate(drift: torch.Tensor, *, d_half=0.06, rho_min=0.875, rho_max=0.96) -> torch.Tensor:
    """rho [N] = clip(2^(-D / d_half), rho_min, rho_max): the tracker keeps half its weight per d_half of drift."""
    return torch.pow(2.0, -drift.double() / d_half).clamp(min=rho_min, max=rho_max)


def beta_update(alpha: torch.Tensor, beta: torch.Tensor, successes: torch.Tensor, failures: torch.Tensor,
                rho: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(rho alpha + sum R, rho beta + sum (1 - R)) per prompt."""
    return rho * alpha + successes, rho * beta + failures


def sampling_weights(p: torch.Tensor, *, eps=0.05) -> torch.Tensor:
    """w = sqrt(p (1 - p)) + eps: largest for prompts solved half the time, never 0."""
    p = torch.as_tensor(p, dtype=torch.float64)
    return (p * (1 - p)).clamp(min=0.0).sqrt() + eps


def prioritized_sample(weights, n: int, rng: random.Random) -> list[int]:
    """n indices drawn with probability w / sum w (uniform when every w is 0): without replacement when n <= the
    number of prompts, with replacement otherwise (the code's np.random.choice(replace=n > M))."""
    w = [float(x) for x in weights]
    if not w or any(x < 0 or not math.isfinite(x) for x in w):
        raise ValueError(f"prioritized_sample: weights must be finite and >= 0 (one per prompt), got {w[:10]}")
    if sum(w) == 0:
        w = [1.0] * len(w)
    if n > len(w):
        return rng.choices(range(len(w)), weights=w, k=n)
    # weighted sampling without replacement (Efraimidis-Spirakis keys u^(1/w); zero weights come last)
    keys = [rng.random() ** (1.0 / x) if x > 0 else -1.0 for x in w]
    return sorted(range(len(w)), key=lambda i: -keys[i])[:n]


# ----------------------------------------------------------------------------- the state and the shaping stage

@dataclass
class SpoTracker:
    """Per prompt text: alpha, beta, visits, the last step seen, and (rho="kl") the response stored at its last
    visit with its log-probs then (`Stored`)."""

    alpha: dict = field(default_factory=dict)
    beta: dict = field(default_factory=dict)
    visits: dict = field(default_factory=dict)
    seen: dict = field(default_factory=dict)
    stored: dict = field(default_factory=dict)

    def evict(self, max_prompts: int) -> None:
        """Forget the least recently seen prompts beyond `max_prompts` (ties: first inserted)."""
        for key in sorted(self.seen, key=self.seen.get)[:max(len(self.seen) - max_prompts, 0)]:
            for table in (self.alpha, self.beta, self.visits, self.seen, self.stored):
                table.pop(key, None)


@dataclass
class Stored:
    """One stored response (a one-row batch: prompt and response ids, mask) and its log-probs [1, T] then."""

    row: RolloutBatch
    logp: torch.Tensor


def prompt_key(prompt) -> str:
    """The tracker's key: the prompt text (a conversational prompt as its JSON)."""
    return prompt if isinstance(prompt, str) else json.dumps(prompt, sort_keys=True, default=str)


def slim_row(batch: RolloutBatch, i: int) -> RolloutBatch:
    """Row i with only what scoring needs (prompt and response ids and masks)."""
    idx = torch.tensor([i])
    return RolloutBatch(response_ids=batch.response_ids[idx], mask=batch.mask[idx],
                        group=torch.zeros(1, dtype=torch.long),
                        prompt_ids=None if batch.prompt_ids is None else batch.prompt_ids[idx],
                        prompt_mask=None if batch.prompt_mask is None else batch.prompt_mask[idx])


def check_spo_params(rho, rho_value, rho_min, rho_max, d_half, offline_n, temperature, max_prompts) -> None:
    if rho not in RHO_TYPES:
        raise ValueError(f"spo-single: rho must be one of {RHO_TYPES}, got {rho!r}")
    if not 0 < rho_value <= 1:
        raise ValueError(f"spo-single: rho_value (the constant forgetting rate) must be in (0, 1], got {rho_value}")
    if not 0 <= rho_min <= rho_max <= 1 or rho_min >= 1:
        raise ValueError(f"spo-single: need 0 <= rho_min <= rho_max <= 1 and rho_min < 1 (N_init = 1/(1 - rho_min)), "
                         f"got rho_min={rho_min}, rho_max={rho_max}")
    if not d_half > 0:
        raise ValueError(f"spo-single: d_half (the drift that halves the tracker's weight) must be > 0, got {d_half}")
    if isinstance(offline_n, bool) or not isinstance(offline_n, int) or offline_n < 0:
        raise ValueError(f"spo-single: offline_n must be an int >= 0 (0: start at alpha = beta = 1/2), got "
                         f"{offline_n!r}")
    if not temperature > 0:
        raise ValueError(f"spo-single: temperature must be > 0, got {temperature}")
    if isinstance(max_prompts, bool) or not isinstance(max_prompts, int) or max_prompts < 1:
        raise ValueError(f"spo-single: max_prompts must be an int >= 1, got {max_prompts!r}")


def check_unit_rewards(rewards: torch.Tensor) -> None:
    bad = torch.nonzero(~((rewards >= 0) & (rewards <= 1))).flatten().tolist()
    if bad:
        raise ValueError(f"spo-single: rewards must lie in [0, 1] (Bernoulli outcomes for the Beta tracker); rows "
                         f"{bad[:10]} do not: use a 0/1 verifier reward, or scale it into [0, 1]")


def first_rows(keys: list[str]) -> dict:
    """{prompt: [its rows]} in order of first appearance."""
    rows: dict = {}
    for i, key in enumerate(keys):
        rows.setdefault(key, []).append(i)
    return rows


def initialize(state: SpoTracker, new: list[str], rows: dict, batch, ctx, *, offline_n, offline_values,
               rho_min) -> None:
    """alpha_0, beta_0 of the prompts seen for the first time: from `offline_values`, else from `offline_n`
    rollouts of the current policy (their environment scores), else 1/2, 1/2."""
    given = offline_values or {}
    scores = {key: list(given[key]) for key in new if key in given}
    todo = [key for key in new if key not in scores]
    if todo and offline_n > 0:
        if ctx.rollout is None or not ctx.examples:
            raise ValueError("spo-single: offline_n > 0 initializes new prompts from rollouts, which needs the step "
                             "context's rollout and examples; pass offline_values or offline_n=0")
        examples = [ctx.examples[int(batch.group[rows[key][0]])] for key in todo]
        fresh = ctx.rollout(examples, group_size=offline_n)
        per_prompt = fresh.rewards.double().reshape(len(todo), offline_n)
        scores.update({key: per_prompt[j].tolist() for j, key in enumerate(todo)})
    for key in new:
        state.alpha[key], state.beta[key] = offline_init(scores.get(key, []), rho_min=rho_min)
        state.visits[key] = 0


def drift_now(state: SpoTracker, keys: list[str], ctx, temperature: float, pad_id: int) -> torch.Tensor:
    """D [K] of each prompt: its stored response's log-probs then vs now (0 for a prompt with none stored)."""
    D = torch.zeros(len(keys), dtype=torch.float64)
    have = [j for j, key in enumerate(keys) if key in state.stored]
    if have:
        stored = [state.stored[keys[j]] for j in have]
        rows = concat([s.row for s in stored], pad_id=pad_id)
        width = rows.mask.shape[1]
        then = torch.cat([F.pad(s.logp.double(), (0, width - s.logp.shape[1])) for s in stored])  # right-padded
        D[have] = policy_drift(then, ctx.score(rows, temperature), rows.mask)
    return D


SPO_SINGLE_LOGS = {
    "spo-single/p_hat": ("SPO (single-stream): mean tracked success estimate p = alpha / (alpha + beta) of the step's "
                         "prompts, read before this step's update (each response's baseline).",
                         "Follows reward/mean as the policy improves (the trackers lag it by a few visits); far "
                         "below reward/mean for long: stale baselines (rho too high, or prompts rarely revisited)."),
    "spo-single/rho": ("SPO (single-stream): mean forgetting rate rho applied to the step's prompts' trackers (0.96 "
                       "on first visits; 0.875 with rho='constant').",
                       "Between rho_min 0.875 and 0.96; pinned at 0.875: the policy moves fast on revisited prompts "
                       "and the trackers keep only the last few outcomes."),
    "spo-single/D": ("SPO (single-stream): mean policy drift mean_t |log pi_then - log pi_now| on each prompt's "
                     "stored response since its last visit (0 on first visits).",
                     "Small (about 0.001 to 0.05 per revisit at fine-tuning learning rates); growing: the policy "
                     "drifts faster than the trackers forget, so the baselines are stale."),
    "spo-single/first_visit_frac": ("SPO (single-stream): share of the step's prompts the tracker saw for the first "
                                    "time (initialized from offline samples).",
                                    "Falls as the prompt pool is covered; stuck at 1: prompts never repeat (a "
                                    "generated task), every baseline is the offline estimate and the tracker adds "
                                    "nothing."),
    "spo-single/n_eff": ("SPO (single-stream): mean effective sample size alpha + beta of the step's prompts' "
                         "trackers after the update.",
                         "Settles near 1 / (1 - rho), about 8 to 25; much larger: rho close to 1 (slow forgetting)."),
}


@registry.reward_shaping(
    "spo-single", title=SPO_TITLE,
    summary="Per-prompt Beta tracker kept across steps: writes its success estimate p = alpha/(alpha+beta) as the "
            "baseline (batch.baseline_rewards), then updates alpha, beta with the rewards, decayed by rho from "
            "the policy's drift on the prompt's stored response.",
    equation=r"\hat p_x = \frac{\alpha_x}{\alpha_x+\beta_x},\quad \alpha_x \leftarrow \rho\,\alpha_x + R,\ "
             r"\beta_x \leftarrow \rho\,\beta_x + 1 - R,\quad \rho = \mathrm{clip}(2^{-D/D_{1/2}}, \rho_{min}, 0.96)",
    reads=("rewards",), provides=("baseline_rewards",), state=SpoTracker, logs=SPO_SINGLE_LOGS,
    choices={"rho": RHO_TYPES})
def spo_single_tracker(batch, ctx, *, rho="kl", rho_value=0.875, rho_min=0.875, rho_max=0.96, d_half=0.06,
                       offline_n=8, offline_values=None, temperature=1.0, max_prompts=65536):
    """batch with `baseline_rewards` [B] = p of each row's prompt before this step's update; the tracker in
    `ctx.state` updated. Reads `rewards` ([0, 1]), `prompts` (the keys), `group` (into `ctx.examples`), and for
    rho="kl" the prompt/response ids (scored with `ctx.score` at `temperature`, 1.0: both ends of D alike).

    rho: "kl" (the code's default) or "constant" (rho_value, 0.875). rho_min 0.875 (`clip_lower`), rho_max 0.96,
    d_half 0.06: the code's. offline_n: offline samples per new prompt (8, `offline_N`); offline_values: {prompt:
    [scores]} given before training (the code's `offline_values` file). max_prompts: tracked prompts kept.
    """
    check_spo_params(rho, rho_value, rho_min, rho_max, d_half, offline_n, temperature, max_prompts)
    batch.require("rewards")
    if len(batch.prompts) != batch.size:
        raise ValueError(f"spo-single keys its tracker by prompt text: batch.prompts has {len(batch.prompts)} "
                         f"entries for {batch.size} rows")
    rewards = batch.rewards.double()
    check_unit_rewards(rewards)
    state: SpoTracker = ctx.state
    rows = first_rows([prompt_key(p) for p in batch.prompts])
    keys = list(rows)
    new = [key for key in keys if key not in state.alpha]
    initialize(state, new, rows, batch, ctx, offline_n=offline_n, offline_values=offline_values, rho_min=rho_min)
    alpha = torch.tensor([state.alpha[k] for k in keys], dtype=torch.float64)
    beta = torch.tensor([state.beta[k] for k in keys], dtype=torch.float64)
    p = success_estimate(alpha, beta)                                                         # [K]
    baseline = torch.zeros(batch.size, dtype=torch.float64)
    for j, key in enumerate(keys):
        baseline[rows[key]] = p[j]
    if rho == "constant":
        D = torch.zeros(len(keys), dtype=torch.float64)
        rates = torch.full((len(keys),), float(rho_value), dtype=torch.float64)
    else:
        D = drift_now(state, keys, ctx, temperature, ctx.pad_id)
        rates = forgetting_rate(D, d_half=d_half, rho_min=rho_min, rho_max=rho_max)
    wins = torch.tensor([float(rewards[rows[k]].sum()) for k in keys], dtype=torch.float64)
    losses = torch.tensor([float((1 - rewards[rows[k]]).sum()) for k in keys], dtype=torch.float64)
    alpha, beta = beta_update(alpha, beta, wins, losses, rates)
    if rho == "kl":  # the response to compare against at the next visit: the prompt's last row, scored now
        last = [rows[k][-1] for k in keys]
        now = ctx.score(batch.select(torch.tensor(last)), temperature)
        for j, key in enumerate(keys):
            state.stored[key] = Stored(slim_row(batch, last[j]), now[j:j + 1].detach().clone())
    for j, key in enumerate(keys):
        state.alpha[key], state.beta[key] = float(alpha[j]), float(beta[j])
        state.visits[key] += 1
        state.seen[key] = ctx.step
    state.evict(max_prompts)
    ctx.metrics.update({"spo-single/p_hat": float(p.mean()), "spo-single/rho": float(rates.mean()),
                        "spo-single/D": float(D.mean()), "spo-single/first_visit_frac": len(new) / len(keys),
                        "spo-single/n_eff": float((alpha + beta).mean())})
    return replace(batch, baseline_rewards=baseline.to(batch.rewards.dtype))


# ----------------------------------------------------------------------------- the advantage

def batch_zscore(x: torch.Tensor, *, eps=1e-8, unbiased=True) -> torch.Tensor:
    """(x - mean) / (std + eps) over all rows (torch's Bessel std, as the code); 0 for a batch of one row."""
    if x.numel() < 2:
        return torch.zeros_like(x)
    return (x - x.mean()) / (x.std(unbiased=unbiased) + eps)


@registry.advantage(
    "spo-single", title=SPO_TITLE,
    summary="R minus the prompt's tracked success estimate (batch.baseline_rewards from reward_shaping spo-single), "
            "z-scored over the whole batch; no groups needed (G = 1).",
    equation=r"A_i = \frac{(R_i - \hat p_{x_i}) - \mathrm{mean}_B(R - \hat p)}{\mathrm{std}_B(R - \hat p) + 10^{-8}}",
    reads=("baseline_rewards",))
def spo_single(batch: RolloutBatch, *, eps=1e-8, unbiased=True):
    """A [B, T] = batch z-score of R_i - baseline_i, broadcast over the mask. Reads `rewards` (+ summed
    `token_rewards`), `baseline_rewards` [B] (p of the row's prompt), `mask`. eps 1e-8 and the Bessel std are the
    code's."""
    batch.require("baseline_rewards")
    baseline = batch.baseline_rewards.double()
    if not bool(torch.isfinite(baseline).all()):
        raise ValueError("spo-single: baseline_rewards must be finite (the tracker's success estimates)")
    return broadcast(batch_zscore(sequence_rewards(batch) - baseline, eps=eps, unbiased=unbiased), batch.mask)
