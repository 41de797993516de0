"""Token masks that decide which response tokens are trained on, and group filters on whole batches."""
from __future__ import annotations

from dataclasses import fields, replace

import torch

from workbench import registry
from workbench.advantages.base import check_rewards
from workbench.advantages.baselines import degenerate_groups
from workbench.advantages.group import group_index
from workbench.batch import RolloutBatch


@registry.data(
    "overlong-filter", title="DAPO: An Open-Source LLM Reinforcement Learning System at Scale",
    summary="Zero the mask of responses truncated at max_new_tokens (no EOS): no reward noise from cut-offs.",
    equation=r"m_{i,\cdot} \leftarrow 0 \text{ if } y_i \text{ has no EOS}")
def overlong_filter(batch: RolloutBatch) -> torch.Tensor:
    """Reads `mask`, `truncated`; returns the mask [B, T] with truncated rows zeroed.

    The filtered rows also leave global token-mean denominators (they are not counted), the choice
    TRL's `mask_truncated_completions` makes.
    """
    batch.require("truncated")
    return batch.mask * (~batch.truncated.bool())[:, None].to(batch.mask.dtype)


@registry.data(
    "high-entropy-mask",
    title="Beyond the 80/20 Rule: High-Entropy Minority Tokens Drive Effective Reinforcement Learning for "
          "LLM Reasoning",
    summary="Train only on the top-rho fraction of valid tokens by entropy (the 'forking' tokens).",
    equation=r"\tau_H = Q_{1-\rho}\{H_t : m_t = 1\},\quad m'_t = m_t\,[H_t \ge \tau_H]")
def high_entropy_mask(batch: RolloutBatch, *, top_entropy_quantile=1.0) -> torch.Tensor:
    """Reads `mask`, `entropy` (detached); returns the mask [B, T] keeping tokens with H_t >= tau_H.

    tau_H is the (1 - rho) quantile, linear interpolation (torch.quantile's default, TRL
    `get_high_entropy_mask`), of the entropies of all valid tokens of the batch (TRL gathers them across
    ranks first; here the batch is the whole set). rho = `top_entropy_quantile`: 1.0 is a no-op (TRL
    default; entropy not needed), the paper uses 0.2. The new mask applies to the PG loss and the entropy
    bonus; ties at tau_H are all kept, so the kept fraction is rho up to ties and 1/n rounding.
    """
    rho = float(top_entropy_quantile)
    if not 0.0 < rho <= 1.0:
        raise ValueError(f"top_entropy_quantile must be in (0, 1], got {top_entropy_quantile}")
    if rho == 1.0:
        return batch.mask.clone()
    batch.require("entropy")
    valid = batch.mask > 0
    if not bool(valid.any()):
        return batch.mask.clone()
    H = batch.entropy.detach().double()
    values = H[valid].sort().values
    # Linear-interpolated quantile, written out because torch.quantile refuses inputs > 2**24 elements.
    pos = (values.numel() - 1) * (1.0 - rho)
    lo, hi = int(pos), min(int(pos) + 1, values.numel() - 1)
    tau = values[lo] + (values[hi] - values[lo]) * (pos - lo)
    return (valid & (H >= tau)).to(batch.mask.dtype)


# ----------------------------------------------------------------------------------------------------
# Dynamic sampling (DAPO): drop zero-variance groups and refill


LEFT_PADDED = ("prompt_ids", "prompt_mask")   # [B, P] fields padded on the left
ID_FIELDS = ("response_ids", "prompt_ids")     # padded with the pad token id, everything else with 0


def _pad_width(x: torch.Tensor, width: int, value, left: bool) -> torch.Tensor:
    missing = width - x.shape[1]
    if missing == 0:
        return x
    pad = torch.full((x.shape[0], missing, *x.shape[2:]), value, dtype=x.dtype, device=x.device)
    return torch.cat([pad, x] if left else [x, pad], dim=1)


def concat(batches, *, pad_id: int = 0):
    """Rows of several batches of the same dataclass type as one batch.

    Tensor fields are concatenated along dim 0; those with a second dim ([B, T], [B, P]) are first padded
    to the widest batch: right-padded (left for prompt_ids/prompt_mask), with `pad_id` for token ids and
    0 elsewhere (so padding is outside every mask). List fields are concatenated. A field that is None
    in some batches but not others, a list that is empty in some batches only, or differing non-tensor
    values are errors. `group` ids are kept as they are (see `fill_groups` for renumbering).
    """
    batches = list(batches)
    if not batches:
        raise ValueError("concat needs at least one batch")
    cls = type(batches[0])
    if any(type(b) is not cls for b in batches):
        raise ValueError(f"concat: batches must all be {cls.__name__}")
    out = {}
    for f in fields(cls):
        values = [getattr(b, f.name) for b in batches]
        if all(v is None for v in values):
            out[f.name] = None
        elif any(v is None for v in values):
            raise ValueError(f"concat: field {f.name!r} is None in some batches and set in others")
        elif isinstance(values[0], torch.Tensor) and values[0].dim() >= 1:
            if values[0].dim() >= 2:
                width = max(v.shape[1] for v in values)
                fill = pad_id if f.name in ID_FIELDS else 0
                values = [_pad_width(v, width, fill, f.name in LEFT_PADDED) for v in values]
            out[f.name] = torch.cat(values, dim=0)
        elif isinstance(values[0], list):
            filled = [len(v) > 0 for v in values]
            if any(filled) and not all(filled):
                raise ValueError(f"concat: list field {f.name!r} is empty in some batches only")
            out[f.name] = [item for v in values for item in v]
        else:
            same = all(torch.equal(v, values[0]) if isinstance(v, torch.Tensor) else v == values[0]
                       for v in values)
            if not same:
                raise ValueError(f"concat: field {f.name!r} differs between batches")
            out[f.name] = values[0]
    return cls(**out)


@registry.data(
    "dynamic-sampling", title="DAPO: An Open-Source LLM Reinforcement Learning System at Scale",
    summary="Drop groups whose rewards are all equal (zero advantage) and refill the batch by resampling.",
    equation=r"\text{keep } g \iff \mathrm{std}_g R > 0 \quad (0 < \mathrm{mean}_g\,\mathrm{acc} < 1)")
def keep_informative_groups(batch: RolloutBatch) -> RolloutBatch:
    """Rows of the groups whose outcome rewards `rewards` are not all equal (verl `filter_groups`).

    Reads `rewards`, `group`. The test is on the outcome reward (verl metric `acc`/`score`), not on
    rewards with KL-in-reward added, which would make almost every group look informative. "std = 0"
    is tested exactly as max == min (singleton groups are dropped). Group ids are unchanged.
    """
    batch.require("rewards")
    check_rewards(batch.rewards)
    keep = ~degenerate_groups(batch.rewards.double(), batch.group)
    if bool(keep.all()):
        return batch
    return batch.select(torch.nonzero(keep).flatten())


def fill_groups(sample_fn, target_groups: int, max_rounds: int = 10, *, pad_id: int = 0):
    """Sample until `target_groups` informative groups are collected (DAPO dynamic sampling).

    sample_fn(round) -> RolloutBatch is called for round = 0, 1, ...; each batch is filtered with
    `keep_informative_groups`, its groups renumbered 0.. in order of collection (ids from different
    rounds never collide), and the batches concatenated (`concat`, `pad_id` for token ids). Stops once
    enough groups exist and trims to exactly `target_groups` groups (verl keeps the first
    train_batch_size groups), or after `max_rounds` calls (verl `max_num_gen_batches`; verl raises
    there, this returns what it has). Returns (batch, info) with info keys: rounds, groups,
    target_groups, shortfall (target_groups - groups, 0 when full), candidate_groups (all groups sampled),
    dropped_groups (zero-variance ones).
    """
    if target_groups < 1 or max_rounds < 1:
        raise ValueError(f"target_groups and max_rounds must be >= 1, got {target_groups}, {max_rounds}")
    kept, collected, candidates, dropped, rounds, last = [], 0, 0, 0, 0, None
    while rounds < max_rounds and collected < target_groups:
        last = sample_fn(rounds)
        rounds += 1
        informative = keep_informative_groups(last)
        n_sampled = int(torch.unique(last.group).numel())
        dense, counts = group_index(informative.group)
        candidates, dropped = candidates + n_sampled, dropped + n_sampled - counts.numel()
        if informative.size:
            kept.append(replace(informative, group=dense + collected))
            collected += counts.numel()
    if kept:
        out = concat(kept, pad_id=pad_id)
        if collected > target_groups:
            out = out.select(torch.nonzero(out.group < target_groups).flatten())
    else:
        out = last.select(torch.zeros(0, dtype=torch.long))
    groups = min(collected, target_groups)
    info = {"rounds": rounds, "groups": groups, "target_groups": target_groups,
            "shortfall": target_groups - groups, "candidate_groups": candidates, "dropped_groups": dropped}
    return out, info
