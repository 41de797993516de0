"""IGPO: information-gain turn rewards (the policy's own belief in the ground truth) + turn-level advantages.

    b_{i,s}   = exp( (1/L) sum_j log pi(a_j | q, response up to turn s, a_<j) )   belief before turn s acts
                (teacher-forced, no gradient; a = a_1..a_L the ground-truth answer's tokens)
    r_{i,s}   = b_{i,s+1} - b_{i,s}  for s < n_i - 1      the information turn s's action and observation brought
    r_{i,n-1} = R_i                                       the outcome (F1 in the paper) on the last turn
    r~        = (r - mean_g r) / (std_g r + eps)          over every reward of the prompt group: `joint` (IG and
                outcome together) or `separate` (IG entries and outcome entries each on their own)
    A_{i,s}   = r~_{i,s} + gamma A_{i,s+1}                turn-level accumulation, broadcast to turn s's policy tokens

The turn rewards telescope: sum_{s<n-1} r_{i,s} = b_{i,n-1} - b_{i,0}. Two components: `reward_shaping:igpo` scores
the beliefs with the policy (`ctx.score`) and writes the turn rewards into `batch.turn_rewards` (and `turn_info[i][s]`
"belief", "info_gain"); `advantage:igpo` normalizes and accumulates them.

Readings (`partial`): the answer a is the text after the last "A:" of the task's expert final action
(`task.expert_actions(example)[-1]`: "A:1795" for calculator, "A:Zar" for search); "A:" is teacher-forced in front
of it but not averaged (the authors average only the answer's tokens between "<answer>" tags). b_0 is scored from the
prompt alone. The std is Bessel's (the paper: "std"), eps 1e-6; the IG-off reduction (`info_gain=False`: the outcome
entry alone, gamma = 1) is `grpo`. Defaults: gamma 1.0 (`train.sh`), norm "joint" (the paper; `train.sh` uses
"separate"), belief "prob" (the paper's exp(mean log p); `train.sh`: "log_prob", the mean log p itself). The paper's
format penalty (-2.0 for unbalanced tags) belongs to the task's reward, not here.

Authors' code, two incompatible official versions, reproduced with `version` and transcribed in
tests/anchors/formulas_igpo.py:
  "745078b" (GuoqingWang1/IGPO Feb-2026 update, seen in the fork debajoycs98/IGPO, `verl/trainer/ppo/core_algos.py::
  compute_grpo_outcome_advantage` + `_compute_turn_level_advantage`): rewards sit on tokens (IG at the last token of
  each turn, observation included; F1 at the last token); an IG exactly 0 becomes 1e-10 (`info_gain.py`); statistics
  with the population std sqrt(var + 1e-8), + eps, and a key with one entry keeps mean = value (r~ = 0); turn
  boundaries are the positions with a non-zero normalized reward, so a reward normalized to exactly 0 merges its turn
  into the next boundary's (and turns after the last boundary get 0).
  "bff163b" (the stored public HEAD, `compute_grpo_outcome_advantage`): token-level reward-to-go (gamma 1) minus the
  group's mean return at the same token position (rows not aligned), no std, on every response token.
"""
from __future__ import annotations

import math

import torch

from workbench import registry
from workbench.advantages.base import check_rewards, sequence_rewards
from workbench.advantages.gigpo import per_token
from workbench.advantages.group import check_group_sizes, group_index, group_mean, keyed_normalize
from workbench.batch import RolloutBatch, left_pad

TITLE = ("Information Gain-based Policy Optimization: A Simple and Effective Approach for Multi-Turn LLM Agents")
NORMS = ("joint", "separate")
VERSIONS = ("paper", "745078b", "bff163b")
BELIEFS = ("prob", "log_prob")


# ----------------------------------------------------------------------------- layout helpers (shared with infopo)

def step_counts(batch: RolloutBatch) -> list[int]:
    """n_i, the number of steps of every row: len(turn_info[i]) (the multi-turn rollout's record)."""
    if not batch.turn_info:
        raise ValueError("this component needs the multi-turn rollout's turn_info (one dict per step of each row)")
    n = [len(row) for row in batch.turn_info]
    if min(n) < 1:
        raise ValueError("every row needs at least one step in turn_info")
    return n


def turn_spans(turn_row: torch.Tensor, mask_row: torch.Tensor, s: int) -> tuple[int, int, list[int], list[int]]:
    """(first position of step s, one past its last position, its action positions, its observation positions)."""
    where = torch.nonzero(turn_row.cpu() == s).flatten().tolist()
    if not where:
        raise ValueError(f"no token carries turn id {s}")
    policy = mask_row.cpu()[where].tolist()
    return (where[0], where[-1] + 1, [p for p, m in zip(where, policy) if m > 0],
            [p for p, m in zip(where, policy) if m <= 0])


def prompt_tokens(batch: RolloutBatch, i: int) -> list[int]:
    batch.require("prompt_ids", "prompt_mask")
    return batch.prompt_ids[i][batch.prompt_mask[i] > 0].tolist()


def scoring_batch(contexts: list[list[int]], targets: list[list[int]], target_masks: list[list[float]], pad_id: int,
                  device=None) -> RolloutBatch:
    """Rows of (context ids -> prompt, left-padded) and (target ids -> response, right-padded) to score with
    `ctx.score`: its log-probs of the response tokens where target_masks is 1 (0 elsewhere)."""
    prompt_ids, prompt_mask = left_pad(contexts, pad_id, device)
    width = max(len(t) for t in targets)
    response = torch.full((len(targets), width), pad_id, dtype=torch.long)
    mask = torch.zeros(len(targets), width)
    for k, (t, m) in enumerate(zip(targets, target_masks)):
        response[k, :len(t)] = torch.tensor(t, dtype=torch.long)
        mask[k, :len(m)] = torch.tensor(m, dtype=torch.float)
    return RolloutBatch(response_ids=response.to(device), mask=mask.to(device),
                        group=torch.zeros(len(targets), dtype=torch.long, device=device),
                        prompt_ids=prompt_ids, prompt_mask=prompt_mask)


def mean_logprobs(ctx, contexts, targets, target_masks, pad_id, device, temperature=1.0, chunk=64) -> torch.Tensor:
    """[N] float64 mean log-prob of each target's masked tokens under the current policy (no gradient), scored in
    chunks of `chunk` rows."""
    out = []
    for start in range(0, len(contexts), chunk):
        part = slice(start, start + chunk)
        sb = scoring_batch(contexts[part], targets[part], target_masks[part], pad_id, device)
        with torch.no_grad():
            logp = ctx.score(sb, temperature).double() * sb.mask
        out.append((logp.sum(-1) / sb.mask.sum(-1).clamp(min=1)).cpu())
    return torch.cat(out)


# ----------------------------------------------------------------------------- beliefs and turn rewards

def answer_parts(text: str) -> tuple[str, str]:
    """(teacher-forced prefix, answer): split at the last "A:" (the whole text is the answer when there is none)."""
    head, sep, tail = text.rpartition("A:")
    return (head + sep, tail) if sep else ("", text)


def ground_truth(task, example) -> str:
    """The answer action text whose belief is scored: the expert's final action."""
    actions = task.expert_actions(example)
    if not actions:
        raise ValueError("igpo: the task's expert_actions(example) is empty; the belief needs a ground-truth answer")
    return actions[-1]


def info_gain_rewards(beliefs: list[list[float]], outcomes: torch.Tensor, S: int) -> torch.Tensor:
    """[B, S] r_{i,s} = b_{i,s+1} - b_{i,s} for s < n_i - 1, R_i on the last step, 0 beyond."""
    out = torch.zeros(len(beliefs), S, dtype=torch.float64)
    for i, b in enumerate(beliefs):
        for s in range(len(b) - 1):
            out[i, s] = b[s + 1] - b[s]
        out[i, len(b) - 1] = float(outcomes[i])
    return out


IGPO_LOGS = {
    "igpo/belief_first": ("IGPO: mean belief b_0 in the ground-truth answer before the first turn (exp of its mean "
                          "token log-prob given the prompt alone).",
                          "Flat across steps (the prompt alone says little about the answer); it rises only if the "
                          "policy learns to guess without searching."),
    "igpo/belief_last": ("IGPO: mean belief before each row's last turn (after its last observation).",
                         "Rises above igpo/belief_first as the turns gather the answer; equal to it: the tools add "
                         "nothing the policy uses."),
    "igpo/info_gain_mean": ("IGPO: mean information-gain turn reward b_{s+1} - b_s over the non-final turns.",
                            "Positive and growing while searches pay off; near 0 or negative: turns that mislead or "
                            "add nothing, where IGPO's dense signal is noise."),
}


@registry.reward_shaping(
    "igpo", title=TITLE,
    summary="Score the policy's belief in the ground-truth answer before every turn (teacher-forced, no gradient); "
            "turn reward = belief gain, the last turn's = the outcome, into batch.turn_rewards.",
    equation=r"r_{i,s} = b_{i,s+1} - b_{i,s},\ b_{i,s} = \exp\Big(\frac{1}{L}\sum_j \log\pi(a_j \mid q, o_{<s}, "
             r"a_{<j})\Big),\ r_{i,n-1} = R_i",
    reads=("turn", "turn_info"), provides=("turn_rewards",), needs=("multi_turn", "expert"), logs=IGPO_LOGS,
    choices={"belief": BELIEFS})
def igpo_rewards(batch: RolloutBatch, ctx, *, belief="prob", temperature=1.0):
    """Reads `prompt_ids`, `response_ids`, `turn`, `mask`, `turn_info`, `rewards` (the outcome), `group` (indexes
    ctx.examples) and the task's expert final action. belief: "prob" (b = exp(mean log p)) or "log_prob" (mean log p,
    the authors' `log_prob_diff`). Logs `igpo/belief_first`, `igpo/belief_last` (mean b over rows at their first and
    last step) and `igpo/info_gain_mean` (mean r over the non-final steps; 0 when there are none)."""
    if belief not in BELIEFS:
        raise ValueError(f"belief must be one of {BELIEFS}, got {belief!r}")
    if not ctx.examples or ctx.task is None or ctx.score is None or ctx.engine is None:
        raise ValueError("igpo rewards need the step context's examples, task, engine and score")
    batch.require("rewards", "turn", "response_ids")
    check_rewards(batch.rewards)
    tok, n_steps = ctx.engine.tokenizer, step_counts(batch)
    contexts, targets, masks = [], [], []
    for i, n in enumerate(n_steps):
        prefix, answer = answer_parts(ground_truth(ctx.task, ctx.examples[int(batch.group[i])]))
        prefix_ids = tok(prefix, add_special_tokens=False)["input_ids"] if prefix else []
        answer_ids = tok(answer, add_special_tokens=False)["input_ids"]
        if not answer_ids:
            raise ValueError(f"igpo: the ground-truth answer of row {i} has no tokens")
        prompt, response = prompt_tokens(batch, i), batch.response_ids[i].tolist()
        for s in range(n):
            start = turn_spans(batch.turn[i], batch.mask[i], s)[0]
            contexts.append(prompt + response[:start] + prefix_ids)  # everything before turn s acts
            targets.append(answer_ids)
            masks.append([1.0] * len(answer_ids))
    mean_logp = mean_logprobs(ctx, contexts, targets, masks, tok.pad_token_id, batch.response_ids.device,
                              temperature, chunk=max(batch.size, 1))
    values = mean_logp.exp() if belief == "prob" else mean_logp
    beliefs, k = [], 0
    for n in n_steps:
        beliefs.append(values[k:k + n].tolist())
        k += n
    batch.turn_rewards = info_gain_rewards(beliefs, sequence_rewards(batch), max(n_steps))  # float64
    for i, row in enumerate(batch.turn_info):
        for s, info in enumerate(row):
            info["belief"] = beliefs[i][s]
            info["info_gain"] = beliefs[i][s + 1] - beliefs[i][s] if s + 1 < len(row) else None
    gains = [b[s + 1] - b[s] for b in beliefs for s in range(len(b) - 1)]
    ctx.metrics["igpo/belief_first"] = sum(b[0] for b in beliefs) / len(beliefs)
    ctx.metrics["igpo/belief_last"] = sum(b[-1] for b in beliefs) / len(beliefs)
    ctx.metrics["igpo/info_gain_mean"] = sum(gains) / len(gains) if gains else 0.0
    return batch


# ----------------------------------------------------------------------------- the advantage

def reward_entries(turn_rewards: torch.Tensor, n_steps: list[int], info_gain: bool) -> list[tuple[int, int, str]]:
    """(row, step, kind) of every reward position: "ig" for s < n_i - 1 (when `info_gain`), "outcome" last."""
    out = []
    for i, n in enumerate(n_steps):
        if info_gain:
            out += [(i, s, "ig") for s in range(n - 1)]
        out.append((i, n - 1, "outcome"))
    return out


def normalized_turn_rewards(turn_rewards, n_steps, group, *, norm="joint", scale=True, eps=1e-6, info_gain=True,
                            version="paper") -> torch.Tensor:
    """[B, S] r~: every reward position normalized within its prompt group (`joint`) or its (prompt group, kind)
    (`separate`); 0 off the reward positions. version "745078b": the authors' statistics (see the module)."""
    if norm not in NORMS:
        raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")
    entries = reward_entries(turn_rewards, n_steps, info_gain)
    rows, steps = torch.tensor([e[0] for e in entries]), torch.tensor([e[1] for e in entries])
    values = turn_rewards[rows, steps].double()
    keys = [(int(group[i]), kind if norm == "separate" else "") for i, _, kind in entries]
    if version == "745078b":
        ig = torch.tensor([kind == "ig" for _, _, kind in entries])
        values = torch.where(ig & (values == 0), torch.full_like(values, 1e-10), values)  # info_gain.py
        normalized = population_normalize(values, keys, scale=scale, eps=eps)
    else:
        normalized = keyed_normalize(values, keys, scale=scale, eps=eps, singletons="zero")
    out = torch.zeros(turn_rewards.shape, dtype=torch.float64)
    out[rows, steps] = normalized
    return out


def population_normalize(values: torch.Tensor, keys: list, *, scale=True, eps=1e-6) -> torch.Tensor:
    """The 745078b statistics: (x - mean) / (sqrt(var_pop + 1e-8) + eps); a key with one value: mean = the value,
    std 1."""
    ids: dict = {}
    dense = torch.tensor([ids.setdefault(key, len(ids)) for key in keys], dtype=torch.long)
    counts = torch.bincount(dense).double()
    mean = group_mean(values, dense, len(ids))  # exact for equal values
    var = torch.zeros(len(ids), dtype=values.dtype).index_add_(0, dense, (values - mean[dense]) ** 2) / counts
    std = torch.where(counts <= 1, torch.ones_like(var), (var + 1e-8).sqrt())
    centred = values - mean[dense]
    return centred / (std[dense] + eps) if scale else centred


def turn_advantages(normalized: torch.Tensor, n_steps: list[int], gamma: float, merge_zero: bool = False):
    """[B, S] A_{i,s} = r~_{i,s} + gamma A_{i,s+1} backwards over each row's steps. merge_zero (745078b): a step with
    r~ = 0 is no boundary; it takes the advantage of the next step that is one (0 after the last)."""
    out = torch.zeros_like(normalized)
    for i, n in enumerate(n_steps):
        following = 0.0
        for s in reversed(range(n)):
            r = float(normalized[i, s])
            if merge_zero and r == 0:
                out[i, s] = following
                continue
            following = r + gamma * following
            out[i, s] = following
    return out


def position_baseline_advantage(turn_rewards, n_steps, batch: RolloutBatch) -> torch.Tensor:
    """[B, T] the bff163b estimator: every response token's reward-to-go (rewards on its turn's last token, gamma 1:
    the suffix sum of the turn rewards from its own turn) minus the group's mean at the same token position."""
    turn = batch.turn.long().cpu()
    valid = turn >= 0
    suffix = turn_rewards.double().cpu().flip(-1).cumsum(-1).flip(-1)                   # [B, S]
    returns = torch.where(valid, suffix.gather(1, turn.clamp(min=0)), torch.zeros_like(turn, dtype=torch.float64))
    dense, counts = group_index(batch.group.cpu())
    sums = torch.zeros(counts.shape[0], returns.shape[1], dtype=torch.float64).index_add_(0, dense, returns)
    return (returns - (sums / counts[:, None])[dense]) * valid


@registry.advantage(
    "igpo", title=TITLE,
    summary="Turn rewards (information gains, the outcome on the last turn) normalized over the prompt group, "
            "accumulated backwards turn by turn (A_s = r~_s + gamma A_{s+1}) and broadcast to each turn's tokens.",
    equation=r"A_{i,s} = \tilde r_{i,s} + \gamma A_{i,s+1},\ \tilde r = \frac{r - \mathrm{mean}_g r}{\mathrm{std}_g r}",
    reads=("turn", "turn_info", "turn_rewards"), needs=("multi_turn",), choices={"norm": NORMS, "version": VERSIONS})
def igpo(batch: RolloutBatch, *, gamma=1.0, norm="joint", scale=True, eps=1e-6, info_gain=True, version="paper",
         allow_singletons=False):
    """IGPO advantage [B, T]. Reads `turn_rewards` (from reward_shaping:igpo), `turn_info`, `turn`, `mask`, `group`;
    with info_gain=False only `rewards` (the outcome on each row's last turn: `grpo` at gamma 1).

    norm: "joint" or "separate". scale: divide by the std. version: "paper", "745078b" or "bff163b" (the authors'
    two codes, see the module). allow_singletons=True: accept a prompt group of one row (refused by default, as
    `grpo`): its rewards are normalized among themselves, and a pool of one reward gets r~ = 0 (as both codes);
    "keep" (verl's A = R) is refused, IGPO's normalization has no such rule."""
    if version not in VERSIONS:
        raise ValueError(f"version must be one of {VERSIONS}, got {version!r}")
    if allow_singletons == "keep":
        raise ValueError("igpo: allow_singletons='keep' (verl's A = R for a group of one) has no counterpart in IGPO, "
                         "whose codes give a pool of one reward r~ = 0; pass allow_singletons=True for that")
    if not (math.isfinite(gamma) and 0 <= gamma <= 1):
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    n_steps = step_counts(batch)
    dense, sizes = group_index(batch.group)
    check_group_sizes(sizes[dense], "igpo", allow_singletons)
    if info_gain:
        if not all("belief" in info for row in batch.turn_info for info in row):
            raise ValueError("igpo: turn_rewards hold no information gains; put reward_shaping 'igpo' in the recipe "
                             "(or pass info_gain=False for the outcome alone)")
        batch.require("turn_rewards")
        turn_rewards = batch.turn_rewards.double()
        check_rewards(torch.cat([turn_rewards[i, :n] for i, n in enumerate(n_steps)]))
    else:
        turn_rewards = torch.zeros(batch.size, max(n_steps), dtype=torch.float64)
        turn_rewards[torch.arange(batch.size), torch.tensor(n_steps) - 1] = sequence_rewards(batch)
    if version == "bff163b":
        batch.require("turn")
        advantages = position_baseline_advantage(turn_rewards, n_steps, batch).to(batch.mask.device)
        return (advantages * batch.mask).to(batch.mask.dtype)
    normalized = normalized_turn_rewards(turn_rewards, n_steps, batch.group, norm=norm, scale=scale, eps=eps,
                                         info_gain=info_gain, version=version)
    advantages = turn_advantages(normalized, n_steps, gamma, merge_zero=version == "745078b")
    return per_token(advantages, batch, n_steps, "igpo")
