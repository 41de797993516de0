"""HBPO's advantage: an intra-budget term that ranks the budget subgroups plus the inter-group z-score.

    b_i              the token budget row i's prompt announced (the `hbpo-reward` rollout writes it; `budget_of`)
    mu_b             = mean of the rewards of the rows of budget b in the prompt group (its subgroup)
    f2(b)            = beta cos(pi b / (2 L_max))     the reward `hbpo-reward` pays a correct answer within budget b
    A_intra(i)       = mu_{b_i} - f2(b_i)              constant within a subgroup
    A_inter(i)       = (R_i - mean_G R) / (std_G R + eps)   over all n rows of the prompt (= `grpo`)
    A_{i,t}          = A_inter(i) + A_intra(i)          on every policy token

A subgroup whose answers earn what its budget promises (every one correct and within b) has A_intra = 0; one that
earns less, because answers run over the budget or are wrong, is pushed down as a whole. Smaller budgets promise
more (f2 falls in b), so a short budget is only favoured when the policy can keep it. With one budget and
f2(b) = mu_b, A = `grpo`.

Paper §3 (the catalog's math) is the default. The budget baseline f2 is `hbpo-reward`'s within-budget value
(`workbench.rewards.hbpo.budget_reward` of a correct answer of length b), with its beta (1.0) and L_max:
`max_len` must be the reward's L_max (its `max_len`, or max_new_tokens where that is None). The advantage cannot
see the run's max_new_tokens, so the recipe gives the same `max_len` to both.

Authors' code: ZJU-REAL/HBPO @ 5c8991d `verl/trainer/ppo/core_algos.py::compute_grpo_outcome_advantage`
(L107-197; f2(b) = 4 cos(3.1416 b / 8192): beta 4, L_max 4096). It adds A_intra **twice** for groups of more than
one row (inside the subgroup branch and again after it): `reference_bug=True` reproduces A = A_inter + 2 A_intra.
Not reproducible and not reproduced: for a one-row group the second add uses the previous row's stale value
(undefined on the first row), `budget[i].item()` is called on a per-token row (an error), and the call site
(`ray_trainer.py` L193) never passes the budget; `reference_bug=True` refuses singleton groups.
Singleton groups otherwise: refused unless allow_singletons (True: A = 0; "keep": A_inter = R as verl, A_intra = 0
as the authors' code).
"""
from __future__ import annotations

import torch

from workbench import registry
from workbench.advantages.base import broadcast, sequence_rewards
from workbench.advantages.group import check_group_sizes, group_stats, grpo
from workbench.batch import RolloutBatch
from workbench.rewards.hbpo import HBPO_TITLE, budget_of, budget_reward


def row_budgets(batch: RolloutBatch, budgets=None) -> torch.Tensor:
    """[B] float64: `budgets` as given, else the budget each row's prompt announces (an error naming the rows
    whose prompt has none)."""
    if budgets is not None:
        out = torch.as_tensor(budgets, dtype=torch.float64).flatten()
        if out.shape != (batch.size,):
            raise ValueError(f"hbpo-advantage: budgets has {out.numel()} entries for {batch.size} rows")
        return out
    if len(batch.prompts) != batch.size:
        raise ValueError(f"hbpo-advantage reads each row's budget from its prompt: batch.prompts has "
                         f"{len(batch.prompts)} entries for {batch.size} rows (sample with the hbpo-reward rollout, "
                         "or pass budgets=[b per row])")
    found = [budget_of(p) for p in batch.prompts]
    missing = [i for i, b in enumerate(found) if b is None]
    if missing:
        raise ValueError(f"hbpo-advantage: rows {missing[:10]} announce no budget ('I will answer the question "
                         "within b tokens'); sample with the hbpo-reward rollout, or pass budgets=[b per row]")
    return torch.tensor(found, dtype=torch.float64)


def budget_baseline(budgets: torch.Tensor, *, max_len: int, beta=1.0) -> torch.Tensor:
    """f2(b) [B]: the hbpo-reward of a correct answer of length b with budget b."""
    return budget_reward(budgets, budgets, torch.ones_like(budgets, dtype=torch.bool), max_len=max_len, beta=beta)


def subgroup_means(rewards: torch.Tensor, group: torch.Tensor, budgets: torch.Tensor) -> torch.Tensor:
    """mu_{b_i} [B]: mean reward of the rows sharing row i's prompt group and budget."""
    _, key = torch.unique(torch.stack([group.long().double(), budgets]), dim=1, return_inverse=True)
    mean, _, _ = group_stats(rewards, key)
    return mean


def intra_budget(rewards: torch.Tensor, group: torch.Tensor, budgets: torch.Tensor, *, max_len: int,
                 beta=1.0) -> torch.Tensor:
    """A_intra [B] = mu_{b_i} - f2(b_i)."""
    return subgroup_means(rewards, group, budgets) - budget_baseline(budgets, max_len=max_len, beta=beta)


@registry.advantage(
    "hbpo-advantage", title=HBPO_TITLE,
    summary="Inter-group z-score over all n rollouts plus an intra-budget term: the budget subgroup's mean reward "
            "minus the budget's promised reward f2(b) = beta cos(pi b / 2 L_max), shared by the subgroup.",
    equation=r"A_{i,j} = \underbrace{\mu_{b_i} - f_2(b_i)}_{A_\text{intra}} + "
             r"\underbrace{\frac{R_{i,j} - \mathrm{mean}\,R}{\mathrm{std}\,R}}_{A_\text{inter}},\quad "
             r"f_2(b) = \beta\cos\frac{\pi b}{2L_{max}}",
    reads=("prompts",))
def hbpo_advantage(batch: RolloutBatch, *, max_len=None, beta=1.0, eps=1e-6, budgets=None, allow_singletons=False,
                   reference_bug=False):
    """A [B, T] (module docstring). Reads `rewards` (+ summed `token_rewards`), `group`, `mask`, and each row's
    budget from `prompts` (or `budgets` [B]).

    max_len: L_max of the hbpo-reward (required: the same value the reward uses, i.e. its max_len or the run's
    max_new_tokens). beta: the reward's beta (1.0, its default; 4 in the authors' code). eps: the z-score's
    (verl 1e-6). reference_bug: the released code's double add of A_intra (module docstring).
    """
    if max_len is None:
        raise ValueError("hbpo-advantage needs max_len, the L_max of the hbpo-reward (its max_len, or the run's "
                         "max_new_tokens where that is None): f2(b) = beta cos(pi b / (2 max_len)) is the baseline "
                         "each budget subgroup is measured against; pass the same max_len to both")
    rewards = sequence_rewards(batch)
    b = row_budgets(batch, budgets)
    _, _, sizes = group_stats(rewards, batch.group)
    single = check_group_sizes(sizes, "hbpo-advantage", allow_singletons)
    if reference_bug and bool(single.any()):
        raise ValueError("hbpo-advantage: reference_bug=True reproduces the released code, whose one-row groups add "
                         "a stale A_intra of another row; sample G >= 2 per prompt")
    a_inter = grpo(batch, eps=eps, allow_singletons=allow_singletons)
    a_intra = intra_budget(rewards, batch.group, b, max_len=max_len, beta=beta).masked_fill(single, 0.0)
    times = 2.0 if reference_bug else 1.0
    return a_inter + broadcast(times * a_intra, batch.mask).to(a_inter.dtype)
