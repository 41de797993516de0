"""HBPO's budget-aware reward: a piecewise cosine in the response length n, given the token budget b that the
prompt announced ("I will answer the question within b tokens"; the `hbpo-reward` rollout writes it).

    R(n | b) = f2(b) = beta cos(pi b / (2 L_max))                       correct, n <= b
               f1(n, b) = beta cos(pi n / (2 L_max)) - alpha |n - b|    correct, b < n <= L_max
               0                                                        otherwise

Inside its budget a correct answer earns the budget's value f2(b), the same for every n <= b (no pressure to be
shorter than the budget asked); past it the reward follows the cosine down and loses alpha per token of
overrun. Smaller budgets pay more (f2 falls in b), so the subgroups' rewards rank the budgets.
"""
from __future__ import annotations

import math
import re

import torch

from workbench import registry
from workbench.rewards import base
from workbench.rewards.length import length_budget, token_lengths

HBPO_TITLE = "Hierarchical Budget Policy Optimization for Adaptive Reasoning"
BUDGET_SENTENCE = "I will answer the question within {budget} tokens"
BUDGET_PATTERN = re.compile(r"I will answer the question within (\d{1,9}) tokens", re.IGNORECASE)


def budget_of(prompt) -> int | None:
    """The budget b the prompt announces (its last budget sentence), or None. A conversational prompt (a list of
    chat messages) is read as its messages' contents."""
    text = base.texts([prompt])[0]
    found = BUDGET_PATTERN.findall(text)
    return int(found[-1]) if found else None


def budget_reward(lengths: torch.Tensor, budgets: torch.Tensor, correct: torch.Tensor, *, max_len: int, alpha=1e-3,
                  beta=1.0) -> torch.Tensor:
    """R(n | b) [B] float64 for lengths n [B], budgets b [B] and correct [B] bool (module docstring)."""
    n, b = lengths.to(torch.float64), budgets.to(torch.float64)
    correct = torch.as_tensor(correct, dtype=torch.bool)
    f2 = beta * torch.cos(math.pi * b / (2 * max_len))
    f1 = beta * torch.cos(math.pi * n / (2 * max_len)) - alpha * (n - b).abs()
    within = correct & (n <= b)
    over = correct & (n > b) & (n <= max_len)
    return torch.where(within, f2, torch.where(over, f1, torch.zeros_like(f1)))


def row_budgets(columns: dict, size: int) -> list[int | None]:
    """Each row's budget: the `budget` column when given, else the one its prompt announces."""
    given = columns.get("budget")
    if given is not None:
        return [None if b is None else int(b) for b in given]
    prompts = base.column(columns, "prompts", required="hbpo-reward")
    if len(prompts) != size:
        raise ValueError(f"hbpo-reward: {len(prompts)} prompts for {size} completions")
    return [budget_of(p) for p in prompts]


@registry.reward(
    "hbpo-reward", title=HBPO_TITLE,
    summary="Budget-conditioned piecewise cosine: a correct answer within its announced budget b earns "
            "beta cos(pi b / 2L), past it beta cos(pi n / 2L) - alpha |n - b|; wrong answers 0.",
    equation=r"R(n\mid b) = \begin{cases}\beta\cos\frac{\pi b}{2L_{max}} & \text{correct},\ n \le b\\ "
             r"\beta\cos\frac{\pi n}{2L_{max}} - \alpha|n - b| & \text{correct},\ b < n \le L_{max}\\ "
             r"0 & \text{otherwise}\end{cases}")
def hbpo_reward(completions, completion_ids, *, alpha=1e-3, beta=1.0, max_len=None, **columns) -> list[float | None]:
    """`budget_reward` with n = len(completion_ids[i]) and b from the `budget` column, or parsed from the prompt
    ("I will answer the question within b tokens", as the `hbpo-reward` rollout and HBPO's data write it, so a
    TRL user's prompts work unchanged). A row without a budget gets None. Correctness: `base.correctness`.

    alpha = 1e-3, beta = 1 (catalog start values; the paper does not state them: our reading). L_max = max_len,
    or the run's `max_new_tokens` when None (the paper: 2560, its largest budget; the rollout's default budgets
    are fractions of max_new_tokens up to 1.0, so here too L_max is the largest budget, whose f2 is 0).
    """
    if not alpha >= 0:
        raise ValueError(f"hbpo-reward: alpha (overrun penalty per token) must be >= 0, got {alpha}")
    budget = length_budget(max_len, columns, reward="hbpo-reward", param="max_len")
    texts = base.texts(completions)
    budgets = row_budgets(columns, len(texts))
    correct = base.correctness(completions, reward="hbpo-reward", **columns)
    known = [b is not None and c is not None for b, c in zip(budgets, correct)]
    reward = budget_reward(token_lengths(completion_ids, len(texts)), torch.tensor([b or 0 for b in budgets]),
                           torch.tensor([bool(c) for c in correct]), max_len=budget, alpha=alpha, beta=beta)
    return [float(r) if k else None for r, k in zip(reward.tolist(), known)]
