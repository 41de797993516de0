"""InfoPO: a counterfactual information signal per turn, fused with the outcome advantage through a variance gate.

    I_{i,t} = (1/|a_{t+1}|) sum_j [ log pi(a_{t+1,j} | h, o_t, a_{t+1,<j}) - log pi(a_{t+1,j} | h, o~_t, a_{t+1,<j}) ]
              how much the real observation o_t moved the policy towards the action it took next, against a neutral
              text o~_t of the same token length ("No information found.", its last token repeated or cut);
              credited to turn t, the action that produced o_t (no signal for the last turn)
    A_out(i)  = (R_i - mean_g R) / (std_g R + eps)                   the outcome advantage (`grpo`)
    A~_{i,t}  = (I_{i,t} - mean_g I) / (std_g I + eps)                over every signalled turn of the prompt group
    w_g       = exp(-std_g(R) / s_0)                                  the gate: open (1) when the group's outcomes tie
    A_{i,t}   = A_out(i) + beta w_g A~_{i,t}                          on turn t's policy tokens

I = 0 when the observation is the neutral text itself or the policy ignores it. With beta = 0 (or a group whose
outcomes vary a lot, w -> 0) the advantage is multi-turn `grpo`. Two components: `reward_shaping:infopo` scores both
contexts with the policy (`ctx.score`, no gradient) and records I_{i,t} in `turn_info[i][t]["counterfactual_gain"]`;
`advantage:infopo` fuses.

Readings (`abstract-only` in the catalog; the authors' code is partial): the signal is the log-prob difference of the
action actually taken next (the catalog's option; `ctx.score` gives the sampled tokens' log-probs, not the whole
distribution, so no full-vocabulary KL), over all its tokens (`max_tokens=None`; the catalog's k = 16 is
`max_tokens=16`). The gate is exp(-std/s_0) with s_0 = 0.1 and beta = 1 (the catalog); std is Bessel's.

Authors' code: kfq20/InfoPO @ c26e93c (partial), transcribed in tests/anchors/formulas_infopo.py:
`verl/trainer/ppo/intrinsic_reward.py::compute_batched_kl_divergence` (the same signal: "KL" there is this mean
log-prob difference) and `verl/trainer/ppo/core_algos.py::compute_info_grpo_advantage`. `version="c26e93c"` reproduces
its fusion: the signal spread as I/|a_t| over turn t's tokens and normalized over the group's non-zero *tokens*
(long actions weigh more; a group with one such token centres it to 0), scaled by a batch-wide
min(1, max(std(A_out), 1) / std(A~)) over the policy tokens; its gate is `gate="sigmoid"`: sigmoid(-std_g(R) / T)
(<= 0.5), its run uses T = `gate_scale` = 0.05 and beta = `intrinsic_weight` = 0.1 (decaying with the epoch,
`intrinsic_decay_rate` 0 by default).
"""
from __future__ import annotations

import math

import torch

from workbench import registry
from workbench.advantages.base import sequence_rewards
from workbench.advantages.gigpo import episode_advantage, per_token
from workbench.advantages.group import group_stats, keyed_normalize
from workbench.advantages.igpo import mean_logprobs, prompt_tokens, step_counts, turn_spans
from workbench.batch import RolloutBatch

TITLE = "InfoPO: Information-Driven Policy Optimization for User-Centric Agents"
PLACEHOLDER = "No information found."
GATES = ("exp", "sigmoid")
VERSIONS = ("card", "c26e93c")
KEY = "counterfactual_gain"


def check_signal(*, placeholder=PLACEHOLDER, max_tokens=None, **_) -> None:
    if not placeholder.strip():
        raise ValueError(f"placeholder (the neutral observation text) must have some text, got {placeholder!r}")
    if max_tokens is not None and (int(max_tokens) != max_tokens or max_tokens < 1):
        raise ValueError(f"max_tokens must be a positive integer or None, got {max_tokens}")


def check_gate(*, gate_scale=0.1, **_) -> None:
    if not (math.isfinite(gate_scale) and gate_scale > 0):
        raise ValueError(f"gate_scale must be finite and > 0, got {gate_scale}")


def neutral_ids(placeholder: list[int], length: int) -> list[int]:
    """The neutral text's ids fitted to `length` tokens: its last token repeated, or cut (the authors' rule)."""
    if not placeholder:
        raise ValueError("the placeholder text has no tokens")
    return (placeholder + [placeholder[-1]] * max(length - len(placeholder), 0))[:length]


INFOPO_LOGS = {
    "infopo/gain_mean": ("InfoPO: mean counterfactual signal I_t (next action's mean log-prob with the real "
                         "observation minus with a neutral text) over the turns followed by an observation and an "
                         "action.",
                         "Positive: the observations steer the next action. Near 0: the policy ignores its feedback "
                         "(or the feedback is empty); large negative: observations push away from what it did."),
    "infopo/gain_positive_frac": ("InfoPO: share of those turns whose observation made the next action more likely.",
                                  "Above 0.5 once the policy reads its observations; stuck near 0.5 means the signal "
                                  "is noise and the gated term only adds variance."),
}


@registry.reward_shaping(
    "infopo", title=TITLE,
    summary="Per turn, the mean log-prob of the next action given the real observation minus given a neutral text "
            "of the same token length (policy-scored, no gradient), recorded per turn in turn_info.",
    equation=r"I_{i,t} = \frac{1}{|a_{t+1}|}\sum_j \log\frac{\pi(a_{t+1,j} \mid h, o_t)}{\pi(a_{t+1,j} \mid h, "
             r"\tilde o_t)}",
    reads=("turn", "turn_info"), needs=("multi_turn",), logs=INFOPO_LOGS, check=check_signal)
def infopo_signal(batch: RolloutBatch, ctx, *, placeholder=PLACEHOLDER, temperature=1.0, max_tokens=None):
    """Reads `prompt_ids`, `response_ids`, `turn`, `mask`, `turn_info`. placeholder: the neutral text (the authors'
    "No information found."). max_tokens: score only the next action's first k tokens (None: all). A turn followed by
    no observation tokens gets I = 0. Logs `infopo/gain_mean` (mean I over signalled turns) and
    `infopo/gain_positive_frac` (share of them with I > 0)."""
    check_signal(placeholder=placeholder, max_tokens=max_tokens)
    if ctx.score is None or ctx.engine is None:
        raise ValueError("infopo needs the step context's engine (tokenizer) and score")
    batch.require("turn", "response_ids")
    tok, n_steps = ctx.engine.tokenizer, step_counts(batch)
    neutral = tok(placeholder, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        real = ctx.score(batch, temperature).double().cpu()                     # [B, T]
    contexts, targets, masks, owners = [], [], [], []
    gains = [[0.0] * (n - 1) for n in n_steps]
    for i, n in enumerate(n_steps):
        prompt, response = prompt_tokens(batch, i), batch.response_ids[i].tolist()
        for t in range(n - 1):
            _, _, _, observed = turn_spans(batch.turn[i], batch.mask[i], t)
            _, end, scored, _ = turn_spans(batch.turn[i], batch.mask[i], t + 1)
            scored = scored[:max_tokens]
            if not observed or not scored:
                continue
            counterfactual = response[:end]
            for p, replaced in zip(observed, neutral_ids(neutral, len(observed))):
                counterfactual[p] = replaced
            contexts.append(prompt)
            targets.append(counterfactual)
            masks.append([1.0 if p in scored else 0.0 for p in range(end)])
            owners.append((i, t, scored))
    if owners:
        without = mean_logprobs(ctx, contexts, targets, masks, tok.pad_token_id, batch.response_ids.device,
                                temperature, chunk=max(batch.size, 1))
        for (i, t, scored), w in zip(owners, without.tolist()):
            gains[i][t] = float(real[i, scored].mean()) - w
    for i, row in enumerate(batch.turn_info):
        for t, info in enumerate(row):
            info[KEY] = gains[i][t] if t < len(row) - 1 else None
    signalled = [gains[i][t] for i, t, _ in owners]
    ctx.metrics["infopo/gain_mean"] = sum(signalled) / len(signalled) if signalled else 0.0
    ctx.metrics["infopo/gain_positive_frac"] = sum(g > 0 for g in signalled) / len(signalled) if signalled else 0.0
    return batch


def outcome_gate(rewards: torch.Tensor, group: torch.Tensor, *, gate="exp", gate_scale=0.1) -> torch.Tensor:
    """[B] w_g = exp(-std_g(R) / s) or sigmoid(-std_g(R) / s), std Bessel over the row's prompt group."""
    if gate not in GATES:
        raise ValueError(f"gate must be one of {GATES}, got {gate!r}")
    check_gate(gate_scale=gate_scale)
    _, std, _ = group_stats(rewards.double(), group)
    return torch.exp(-std / gate_scale) if gate == "exp" else torch.sigmoid(-std / gate_scale)


def recorded_gains(batch: RolloutBatch, n_steps: list[int]) -> torch.Tensor:
    """[B, S] I_{i,t} from turn_info (0 on the last turn and beyond)."""
    out = torch.zeros(batch.size, max(n_steps), dtype=torch.float64)
    for i, row in enumerate(batch.turn_info):
        for t, info in enumerate(row[:-1]):
            if KEY not in info:
                raise ValueError("infopo: turn_info has no counterfactual signal; put reward_shaping 'infopo' in the "
                                 "recipe (or intrinsic_weight=0 for the outcome alone)")
            out[i, t] = float(info[KEY])
    return out


def turn_normalized(gains: torch.Tensor, n_steps: list[int], group: torch.Tensor, *, scale=True, eps=1e-6):
    """[B, S] A~: the signal of every turn t < n_i - 1 normalized over its prompt group's signalled turns."""
    members = [(i, t) for i, n in enumerate(n_steps) for t in range(n - 1)]
    out = torch.zeros_like(gains)
    if members:
        rows, steps = torch.tensor([m[0] for m in members]), torch.tensor([m[1] for m in members])
        out[rows, steps] = keyed_normalize(gains[rows, steps], [int(group[i]) for i, _ in members], scale=scale,
                                           eps=eps, singletons="zero")
    return out


def token_normalized(token_gain: torch.Tensor, mask: torch.Tensor, group: torch.Tensor, *, scale=True, eps=1e-6):
    """[B, T] the c26e93c normalization: over each group's non-zero policy tokens (Bessel std; one token: centred to
    0, std 1); zero tokens stay 0."""
    nonzero = (token_gain != 0) & (mask > 0)
    rows, cols = torch.nonzero(nonzero, as_tuple=True)
    out = torch.zeros_like(token_gain)
    if rows.numel():
        keys = [int(group[i]) for i in rows.tolist()]
        out[rows, cols] = keyed_normalize(token_gain[rows, cols], keys, scale=scale, eps=eps, singletons="zero")
    return out


@registry.advantage(
    "infopo", title=TITLE,
    summary="Outcome group advantage plus beta x a variance gate x the group-normalized counterfactual information "
            "signal of each turn; the gate opens when the group's outcomes tie.",
    equation=r"A_{i,t} = \frac{R_i - \mathrm{mean}_g R}{\mathrm{std}_g R} + \beta\,e^{-\mathrm{std}_g R / s_0}\,"
             r"\frac{I_{i,t} - \mathrm{mean}_g I}{\mathrm{std}_g I}",
    reads=("turn", "turn_info"), needs=("multi_turn",), choices={"gate": GATES, "version": VERSIONS}, check=check_gate)
def infopo(batch: RolloutBatch, *, intrinsic_weight=1.0, gate="exp", gate_scale=0.1, scale=True, eps=1e-6,
           version="card", allow_singletons=False):
    """InfoPO advantage [B, T]. Reads `rewards`, `group`, `mask`, `turn`, `turn_info` (the signal of
    reward_shaping:infopo). intrinsic_weight: beta (0: multi-turn `grpo`). gate: "exp" (catalog) or "sigmoid" (the
    authors'), with scale `gate_scale`. scale: divide both advantages by their std. version: "card" or "c26e93c"
    (token-level normalization and the magnitude ratio of the authors' code). allow_singletons: a prompt with one
    trajectory, for the outcome term (`gigpo`'s A_E: False refuses, True 0, "keep" verl's A = R / (1 + eps))."""
    if version not in VERSIONS:
        raise ValueError(f"version must be one of {VERSIONS}, got {version!r}")
    if not math.isfinite(intrinsic_weight) or intrinsic_weight < 0:
        raise ValueError(f"intrinsic_weight must be finite and >= 0, got {intrinsic_weight}")
    check_gate(gate_scale=gate_scale)
    mode = "mean_std_norm" if scale else "mean_norm"
    n_steps = step_counts(batch)
    a_out = episode_advantage(batch, n_steps, mode=mode, eps=eps, allow_singletons=allow_singletons)   # [B]
    outcome = a_out[:, None].to(batch.mask.dtype) * batch.mask
    if intrinsic_weight == 0:
        return outcome
    group = batch.group.cpu()
    w = intrinsic_weight * outcome_gate(sequence_rewards(batch).cpu(), group, gate=gate, gate_scale=gate_scale)
    w = w[:, None].to(device=batch.mask.device, dtype=batch.mask.dtype)                       # [B, 1]
    gains = recorded_gains(batch, n_steps)
    if version == "card":
        return outcome + w * per_token(turn_normalized(gains, n_steps, group, scale=scale, eps=eps), batch, n_steps,
                                       "infopo")
    lengths = torch.zeros_like(gains)
    for i, n in enumerate(n_steps):
        for t in range(n):
            lengths[i, t] = len(turn_spans(batch.turn[i], batch.mask[i], t)[2])
    token_gain = per_token(gains / lengths.clamp(min=1), batch, n_steps, "infopo").double().cpu()
    mask = batch.mask.cpu()
    a_info = token_normalized(token_gain, mask, group, scale=scale, eps=eps)
    valid = mask > 0
    outcome_std = float(outcome.cpu()[valid].double().std()) + eps
    ratio = min(1.0, max(outcome_std, 1.0) / (float(a_info[valid].std()) + eps))
    return outcome + w * (ratio * a_info).to(device=batch.mask.device, dtype=batch.mask.dtype)
