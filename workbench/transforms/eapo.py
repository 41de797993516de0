"""EAPO's sample set (IterResearch): each round of an episode is a training sample, and the set is cut to a
multiple of the data-parallel size (adaptive downsampling).

A multi-turn row (prompt | action_0 obs_0 action_1 obs_1 ... action_{T-1}) becomes T rows; row t has

    prompt    the episode's prompt + everything before action_t (earlier actions and observations), as token ids
    response  action_t's tokens (mask 1), with their rollout log-probs (mu_logp), turn id 0
    turn_info [the step's info + {"round": t, "rounds": T}]        (read by the reward shaping `eapo`)
    rewards, scores, group   the episode's (the reward shaping discounts the reward per round)

so the trainer scores exactly the tokens the episode sampled, in the context they were sampled in. IterResearch
rebuilds a compact Markovian workspace (question, evolving report, last action and tool result) as each round's
prompt; our environments keep no report, so the round's prompt is the full history (the catalog's "partial").
"""
from __future__ import annotations

from collections import Counter
from dataclasses import fields, replace

import torch

from workbench import registry
from workbench.batch import LEFT_PADDED, RolloutBatch, concat
from workbench.rewards.eapo import EAPO_TITLE, ROUND, ROUNDS

PER_STEP = ("turn_rewards",)  # [B, S] fields indexed by step, not by response token


def n_rounds(batch: RolloutBatch, i: int) -> int:
    """T of row i: its number of steps; a row without turn ids or step infos is one round (its whole response)."""
    return max(len(batch.turn_info[i]), 1) if batch.turn_info and batch.turn is not None else 1


def round_spans(batch: RolloutBatch, i: int) -> list[tuple[int, int, int]]:
    """(t, start, end) of the action tokens of each round of row i: the tokens of turn t with mask 1 (a contiguous
    run)."""
    mask = batch.mask[i] > 0
    rounds = n_rounds(batch, i)
    spans = []
    for t in range(rounds):
        where = mask & (batch.turn[i] == t) if rounds > 1 else mask
        idx = torch.nonzero(where).flatten()
        if idx.numel() == 0:
            continue  # an empty action: nothing to train on, the round still counts in T
        start, end = int(idx[0]), int(idx[-1]) + 1
        if end - start != idx.numel():
            raise ValueError(f"eapo: the action tokens of row {i}, round {t} are not contiguous")
        spans.append((t, start, end))
    return spans


def round_row(batch: RolloutBatch, i: int, t: int, start: int, end: int, rounds: int) -> RolloutBatch:
    """Row i's round t as a one-row batch (layout in the module docstring)."""
    row = batch.select(torch.tensor([i]))
    updates = {f.name: getattr(row, f.name)[:, start:end] for f in fields(row)
               if isinstance(getattr(row, f.name), torch.Tensor) and getattr(row, f.name).dim() >= 2
               and f.name not in LEFT_PADDED + PER_STEP}  # [1, T] response-token fields: the action's slice
    if row.prompt_ids is not None:
        history = torch.cat([row.prompt_ids[0][row.prompt_mask[0] > 0], row.response_ids[0, :start]])[None]
        updates.update(prompt_ids=history, prompt_mask=torch.ones(history.shape, dtype=row.prompt_mask.dtype))
    elif start > 0:
        raise ValueError("eapo: a batch without prompt_ids cannot carry a round's history")
    if row.turn is not None:
        updates["turn"] = torch.zeros_like(updates["turn"])
    if row.turn_rewards is not None:
        updates["turn_rewards"] = row.turn_rewards[:, t:t + 1]
    if row.turn_info:
        step = row.turn_info[0][t] if t < len(row.turn_info[0]) else {}
        updates["turn_info"] = [[{**step, ROUND: t, ROUNDS: rounds}]]
        if rounds > 1:
            updates["completions"] = [step.get("action", "")]
    if row.truncated is not None:
        updates["truncated"] = row.truncated & (t == rounds - 1)  # only the last round was cut
    return replace(row, **updates)


def split_rounds(batch: RolloutBatch, *, pad_id: int = 0) -> RolloutBatch:
    """One row per round of every episode (rows of a one-turn batch come back as they were, plus round markers)."""
    rows = []
    for i in range(batch.size):
        rows += [round_row(batch, i, t, start, end, n_rounds(batch, i)) for t, start, end in round_spans(batch, i)]
    if not rows:
        raise ValueError("eapo: no row of the batch has an action token")
    return concat(rows, pad_id=pad_id)


def check_dp_size(dp_size) -> None:
    if isinstance(dp_size, bool) or not (isinstance(dp_size, int) and dp_size >= 1):
        raise ValueError(f"eapo: dp_size must be an integer >= 1, got {dp_size!r}")


def downsample(batch: RolloutBatch, dp_size: int, generator: torch.Generator) -> tuple[RolloutBatch, int]:
    """(batch cut to the largest multiple of dp_size, rows dropped < dp_size). The dropped rows are drawn at random,
    first among groups that keep at least 2 rows (a group of one has no baseline)."""
    check_dp_size(dp_size)
    n = batch.size
    excess = n % dp_size
    if n < dp_size:
        raise ValueError(f"eapo: {n} round samples cannot fill dp_size={dp_size} ranks")
    order = torch.randperm(n, generator=generator).tolist()
    sizes = Counter(batch.group.tolist())
    drop: list[int] = []
    for i in order:  # random rows whose group keeps >= 2
        g = int(batch.group[i])
        if len(drop) < excess and sizes[g] > 2:
            drop.append(i)
            sizes[g] -= 1
    drop += [i for i in order if i not in drop][:excess - len(drop)]
    keep = torch.tensor(sorted(set(range(n)) - set(drop)), dtype=torch.long)
    return (batch.select(keep) if drop else batch), len(drop)


EAPO_ROUND_LOGS = {
    "eapo/rounds": ("EAPO: mean rounds per episode; each round becomes a training row.",
                    "Falling slowly as the discount favours shorter successful episodes; 1 on a one-turn task."),
    "eapo/dropped": ("EAPO: round rows dropped to cut the set to a multiple of the data-parallel size (< dp_size).",
                     "0 with dp_size 1; always below dp_size."),
}


@registry.group_transform(
    "eapo", title=EAPO_TITLE,
    summary="Every round of an episode becomes a training sample (its history as the prompt), and the sample set "
            "is cut to the largest multiple of the data-parallel size at random (adaptive downsampling).",
    equation=r"|\mathcal{C}_{train}| = \lfloor |\mathcal{C}| / \mathrm{DP} \rfloor \cdot \mathrm{DP}",
    reads=("turn", "turn_info"), logs=EAPO_ROUND_LOGS)
def eapo_rounds(batch, ctx, *, dp_size=1, per_round=True):
    """`split_rounds` (per_round=True), then `downsample` to a multiple of `dp_size` with this step's generator.

    dp_size: the data-parallel size (1 here by default: one process, nothing dropped). IterResearch cuts the whole
    step's sample set before splitting it over its ranks; our data parallelism shards the prompts before the
    rollout and needs no equal split, so dp_size cuts the batch this process holds. per_round=False keeps whole
    episodes (then only the downsampling runs). Logs eapo/rounds (mean rounds per episode) and eapo/dropped (rows
    dropped by the downsampling)."""
    check_dp_size(dp_size)
    rounds = sum(n_rounds(batch, i) for i in range(batch.size)) / batch.size
    if per_round:
        batch = split_rounds(batch, pad_id=ctx.pad_id)
    batch, dropped = downsample(batch, dp_size, ctx.generator())
    ctx.metrics.update({"eapo/rounds": rounds, "eapo/dropped": float(dropped)})
    return batch
