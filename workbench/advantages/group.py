"""Group baselines for outcome rewards: GRPO's z-score and RLOO's leave-one-out mean.

Each prompt is sampled G times (`batch.group` names the prompt); the baseline is computed inside the
group and the per-sequence advantage is broadcast over the response mask.
"""
from __future__ import annotations

import torch

from workbench import registry
from workbench.advantages.base import TOKEN_REWARD_MODES, broadcast, sequence_rewards, split_rewards, with_to_go
from workbench.batch import RolloutBatch

SCALES = ("group", "batch", "none")  # what GRPO divides R - mean_g R by: the group std, the batch std, nothing
EPS_MODES = ("add", "floor_add")     # std + eps, or sqrt(max(var, eps)) + eps


def group_index(group: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Dense ids 0..K-1 per row and the size of each group: ([B], [K])."""
    _, dense = torch.unique(group, return_inverse=True)
    return dense, torch.bincount(dense)


def group_mean(x: torch.Tensor, dense: torch.Tensor, k: int, weights: torch.Tensor | None = None) -> torch.Tensor:
    """[K] mean of x [B] over each of the K groups of dense ids [B] (weighted by `weights` [B] when given),
    exact for a group whose values are all equal: min_g + sum_i w_i (x_i - min_g) / sum_i w_i.

    Why shifted: a plain sum rounds (16 rewards of 1.6e4 sum to a float that / 16 is a few ulps off), so an
    all-equal group got R - mean ~ 1e-12 and, divided by std + eps ~ 1e-6, a z-score ~ 1e-6 instead of the 0 the
    authors' codes give, growing with the reward scale. Shifted by the group's own minimum, every term of an
    all-equal group is exactly 0 and its mean exactly that value. A group with no weight gets its minimum."""
    lo = torch.full((k,), torch.inf, dtype=x.dtype, device=x.device).scatter_reduce(0, dense, x, "amin")
    w = torch.ones_like(x) if weights is None else weights.to(x.dtype)
    shifted = torch.zeros(k, dtype=x.dtype, device=x.device).index_add_(0, dense, w * (x - lo[dense]))
    total = torch.zeros(k, dtype=x.dtype, device=x.device).index_add_(0, dense, w)
    return lo + torch.where(total > 0, shifted / torch.where(total > 0, total, 1.0), 0.0)


def group_stats(x: torch.Tensor, group: torch.Tensor, unbiased: bool = True):
    """Per-row mean and std of x over its group: ([B], [B], group sizes [B]); exact 0, 0 for equal values
    (`group_mean`)."""
    dense, counts = group_index(group)
    k = counts.shape[0]
    mean = group_mean(x, dense, k)[dense]
    sq = torch.zeros(k, dtype=x.dtype).index_add_(0, dense, (x - mean) ** 2)
    denom = (counts - 1).clamp(min=1) if unbiased else counts
    std = (sq / denom).sqrt()[dense]
    return mean, std, counts[dense]


SINGLETONS = (False, True, "keep")  # refuse; A = 0; verl's baseline 0 (std 1), i.e. A = R (/(1 + eps))


def check_group_sizes(sizes: torch.Tensor, method: str, allow_singletons) -> torch.Tensor:
    """Rows whose group has one sample: an error unless `allow_singletons` is True (they get A = 0) or "keep"
    (verl's convention: such a group's mean is 0 and its std 1, so A = R, scaled by 1/(1 + eps))."""
    if allow_singletons not in SINGLETONS:
        raise ValueError(f"allow_singletons must be one of {SINGLETONS}, got {allow_singletons!r}")
    single = sizes < 2
    if bool(single.any()) and not allow_singletons:
        rows = torch.nonzero(single).flatten().tolist()[:10]
        raise ValueError(
            f"{method}: a group of one (rows {rows}) has no baseline; sample G >= 2 responses per "
            "prompt or pass allow_singletons=True to give such rows A = 0 ('keep': A = R, as verl)")
    return single


KEYED_SINGLETONS = ("keep", "zero")


def keyed_normalize(values: torch.Tensor, keys: list, *, scale=True, eps=1e-6, singletons="keep",
                    unbiased=True) -> torch.Tensor:
    """[N] each value centred within the samples sharing its key (any hashables, one per value: a prompt id, a
    (prompt, tag) or (prompt, state) pair), divided by that key's std + eps when `scale` (Bessel, or population
    when `unbiased=False`): `group_stats` over dense key ids. A key with one sample: "keep" (verl's convention,
    mean 0 and std 1: the value stays, / (1 + eps) when scaled) or "zero" (0: no baseline, no signal)."""
    if singletons not in KEYED_SINGLETONS:
        raise ValueError(f"singletons must be one of {KEYED_SINGLETONS}, got {singletons!r}")
    if len(keys) != values.shape[0]:
        raise ValueError(f"keyed_normalize: {len(keys)} keys for {values.shape[0]} values")
    ids: dict = {}
    dense = torch.tensor([ids.setdefault(key, len(ids)) for key in keys], dtype=torch.long)
    mean, std, sizes = group_stats(values, dense, unbiased)
    single = sizes < 2
    if singletons == "keep":
        mean, std = mean.masked_fill(single, 0.0), std.masked_fill(single, 1.0)
    out = (values - mean) / (std + eps) if scale else values - mean
    return out if singletons == "keep" else out.masked_fill(single, 0.0)


@registry.advantage(
    "grpo", title="DeepSeekMath: Pushing the Limits of Mathematical Reasoning in Open Language Models",
    summary="Group z-score of outcome rewards (std on/off, Bessel on/off, eps placement).",
    equation=r"A_i = \frac{R_i - \mathrm{mean}_g R}{\mathrm{std}_g R + \epsilon}",
    choices={"scale": SCALES, "eps_mode": EPS_MODES, "token_rewards_mode": TOKEN_REWARD_MODES})
def grpo(batch: RolloutBatch, *, scale="group", unbiased=True, eps=1e-6, eps_mode="add",
         allow_singletons=False, token_rewards_mode="in_baseline"):
    """GRPO advantage. Reads `rewards` (+ summed `token_rewards`), `group`, `mask`.

    scale: "group" divides by the group std (GRPO), "batch" by the batch std with the group mean
    (LitePPO, TRL `scale_rewards="batch"`), "none" keeps R - mean_g R (Dr.GRPO).
    unbiased: Bessel-corrected std (TRL, verl, OpenRLHF) or population std (nano-aha-moment, GRPO-Zero).
    eps_mode: "add" is std + eps (TRL 1e-4, verl 1e-6, OpenRLHF 1e-9); "floor_add" is
    sqrt(max(var, eps)) + eps (verl `grpo_vectorized`).
    token_rewards_mode: how per-token rewards (KL in the reward) enter, see `split_rewards`.
    allow_singletons: False refuses a group of one, True gives it A = 0, "keep" is verl's convention (mean 0,
    std 1: A = R / (1 + eps), or R without std scaling).
    """
    if scale not in SCALES:
        raise ValueError(f"scale must be 'group', 'batch' or 'none', got {scale!r}")
    if eps_mode not in EPS_MODES:
        raise ValueError(f"eps_mode must be 'add' or 'floor_add', got {eps_mode!r}")
    rewards, to_go = split_rewards(batch, token_rewards_mode)
    mean, std, sizes = group_stats(rewards, batch.group, unbiased)
    single = check_group_sizes(sizes, "grpo", allow_singletons)
    if allow_singletons == "keep":
        mean, std, single = mean.masked_fill(single, 0.0), std.masked_fill(single, 1.0), torch.zeros_like(single)
    centered = rewards - mean
    if scale == "batch":
        std = rewards.std(unbiased=unbiased).expand_as(rewards) if rewards.numel() > 1 else torch.ones_like(rewards)
    if scale != "none":
        if eps_mode == "add":
            centered = centered / (std + eps)
        else:
            centered = centered / (std.pow(2).clamp(min=eps).sqrt() + eps)
    return with_to_go(broadcast(centered.masked_fill(single, 0.0), batch.mask), to_go)


@registry.advantage(
    "rloo",
    title="Back to Basics: Revisiting REINFORCE Style Optimization for Learning from Human Feedback in LLMs",
    summary="Leave-one-out mean of the other G-1 rewards as the baseline.",
    equation=r"A_i = R_i - \frac{1}{G-1}\sum_{j\ne i} R_j = \frac{G}{G-1}(R_i - \mathrm{mean}_g R)",
    choices={"token_rewards_mode": TOKEN_REWARD_MODES})
def rloo(batch: RolloutBatch, *, allow_singletons=False, token_rewards_mode="in_baseline"):
    """RLOO advantage. Reads `rewards` (+ `token_rewards`, see `split_rewards`), `group`, `mask`."""
    rewards, to_go = split_rewards(batch, token_rewards_mode)
    mean, _, sizes = group_stats(rewards, batch.group)
    single = check_group_sizes(sizes, "rloo", allow_singletons)
    g = sizes.to(rewards.dtype)
    # R_i - mean_{j != i} R_j written as G/(G-1) (R_i - mean_g R): exactly 0 for equal rewards (`group_mean`)
    advantage = g / (g - 1).clamp(min=1) * (rewards - mean)
    kept = rewards if allow_singletons == "keep" else torch.zeros_like(rewards)  # a singleton's baseline is 0 (verl)
    return with_to_go(broadcast(torch.where(single, kept, advantage), batch.mask), to_go)


def grpo_passk(batch: RolloutBatch, *, norm_by_std=True, eps=1e-6):
    """Pass@k-style group advantage (verl `grpo_passk`, arXiv 2503.19595): only the best response of each
    group gets a non-zero advantage, R_max - R_second, divided by the group's Bessel std + eps when
    `norm_by_std`. Ties go to the first best response in row order (torch.topk, as verl).

    Not registered: `grpo_passk` is not a key of data/catalog.tsv, and only catalog keys are registered.
    """
    rewards = sequence_rewards(batch)
    dense, counts = group_index(batch.group)
    check_group_sizes(counts[dense], "grpo_passk", allow_singletons=False)
    out = torch.zeros_like(rewards)
    for g in range(counts.shape[0]):
        rows = torch.nonzero(dense == g).flatten()
        top, where = torch.topk(rewards[rows], 2)
        advantage = top[0] - top[1]
        if norm_by_std:
            advantage = advantage / (rewards[rows].std() + eps)
        out[rows[where[0]]] = advantage
    return broadcast(out, batch.mask)


def group_pass_rates(batch: RolloutBatch) -> tuple[torch.Tensor, list[str]]:
    """(p_hat [K], prompt of each dense group [K]): the mean verifier score, clamped to [0, 1], of each group
    (the pass rate for 0/1 verifiers)."""
    if len(batch.prompts) != batch.size:
        raise ValueError(f"pass rates are keyed by prompt text: batch.prompts has {len(batch.prompts)} entries "
                         f"for {batch.size} rows")
    scores = (batch.scores if batch.scores is not None else batch.rewards).double().clamp(0.0, 1.0)
    dense, counts = group_index(batch.group)
    sums = torch.zeros(counts.shape[0], dtype=torch.float64).index_add_(0, dense, scores)
    first = [int(torch.nonzero(dense == g)[0]) for g in range(counts.shape[0])]
    return sums / counts, [batch.prompts[i] for i in first]
