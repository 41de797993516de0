"""HBPO's budget-aware reward: a piecewise cosine in the response length n, given the token budget b that the
prompt announced ("I will answer the question within b tokens"; the `hbpo-reward` rollout writes it).

    R(n | b) = f2(b) = beta cos(pi b / (2 L_max))                       correct, n <= b
               f1(n, b) = beta cos(pi n / (2 L_max)) - alpha |n - b|    correct, b < n <= L_max
               0                                                        otherwise

Inside its budget a correct answer earns the budget's value f2(b), the same for every n <= b (no pressure to be
shorter than the budget asked); past it the reward follows the cosine down and loses alpha per token of
overrun. Smaller budgets pay more (f2 falls in b), so the subgroups' rewards rank the budgets. L_max is the
maximum context length (paper §3.2), above every budget: 1 <= b <= L_max, so f2(b) > 0 for b < L_max.

The authors' code (ZJU-REAL/HBPO `rllm/rewards/math_reward.py::RewardMathFn`, commit 243997e) uses L_max = 4096
(cos(pi n / 8192), n <= 4096), budgets 512/1024/2048/2560, beta = 4, alpha = 1/4096, and min(f1, f2) for every
n <= L_max (below the budget, a short answer can get less than f2); it announces "<think> I will answer the
question with b tokens" ("with", where the paper writes "within": both are read here). Not reproduced: the
min form and its constants (the catalog's start values are kept).
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
# "within" (the paper, our rollout) or "with" (the authors' rollout prefill)
BUDGET_PATTERN = re.compile(r"I will answer the question with(?:in)? (\d{1,9}) tokens", re.IGNORECASE)


def budget_of(prompt) -> int | None:
    """The budget b the prompt announces (its last budget sentence), or None. A conversational prompt (a list of
    chat messages) is read as all its messages' contents (`base.texts` reads only the assistant's: a completion's)."""
    if isinstance(prompt, (list, tuple)) and all(isinstance(m, dict) for m in prompt):
        prompt = "\n".join(str(m.get("content") or "") for m in prompt)
    if not isinstance(prompt, str):
        raise TypeError(f"hbpo-reward: a prompt is a string or a list of chat messages, got {type(prompt).__name__}")
    found = BUDGET_PATTERN.findall(prompt)
    return int(found[-1]) if found else None


def check_budgets(budgets, max_len: int) -> None:
    """Every budget b (None: no budget, skipped) is an integer with 1 <= b <= L_max; else a ValueError naming it."""
    for i, b in enumerate(budgets):
        if b is None:
            continue
        integral = not isinstance(b, bool) and isinstance(b, (int, float)) and float(b).is_integer()
        if not integral or not 1 <= b <= max_len:
            raise ValueError(f"hbpo-reward: row {i} has budget {b!r}; a budget must be an integer in [1, max_len = "
                             f"{max_len}] (L_max, the longest response the reward scores): pass budgets <= max_len, "
                             "or a larger max_len (max_new_tokens)")


def budget_reward(lengths: torch.Tensor, budgets: torch.Tensor, correct: torch.Tensor, *, max_len: int, alpha=1e-3,
                  beta=1.0) -> torch.Tensor:
    """R(n | b) [B] float64 for lengths n [B], budgets b [B] and correct [B] bool (module docstring)."""
    n, b = lengths.to(torch.float64), budgets.to(torch.float64)
    check_budgets(b.tolist(), max_len)
    correct = torch.as_tensor(correct, dtype=torch.bool)
    f2 = beta * torch.cos(math.pi * b / (2 * max_len))
    f1 = beta * torch.cos(math.pi * n / (2 * max_len)) - alpha * (n - b).abs()
    within = correct & (n <= b) & (n <= max_len)
    over = correct & (n > b) & (n <= max_len)
    return torch.where(within, f2, torch.where(over, f1, torch.zeros_like(f1)))


def row_budgets(columns: dict, size: int) -> list[int | float | None]:
    """Each row's budget: the `budget` column when given, else the one its prompt announces."""
    given = columns.get("budget")
    if given is not None:
        if len(given) != size:
            raise ValueError(f"hbpo-reward: the budget column has {len(given)} rows for {size} completions; give "
                             "one budget (or None) per completion")
        return [None if b is None else b.item() if hasattr(b, "item") else b for b in given]
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

    alpha = 1e-3, beta = 1 (catalog start values; the paper does not state them: our reading; the authors' code
    uses 1/4096 and 4, module docstring). L_max = max_len, or the run's `max_new_tokens` when None: the paper's
    L_max is the maximum context length (4096 in the authors' code), above its largest budget 2560, and the
    rollout's default budgets are the same fractions (0.125 .. 0.625) of max_new_tokens, so every f2 is > 0.
    A budget outside [1, L_max], or not an integer, is refused (ValueError naming it).
    """
    if not alpha >= 0:
        raise ValueError(f"hbpo-reward: alpha (overrun penalty per token) must be >= 0, got {alpha}")
    budget = length_budget(max_len, columns, reward="hbpo-reward", param="max_len")
    texts = base.texts(completions)
    budgets = row_budgets(columns, len(texts))
    check_budgets(budgets, budget)
    lengths = token_lengths(completion_ids, len(texts))
    correct = base.correctness(completions, reward="hbpo-reward", **columns)
    known = [b is not None and c is not None for b, c in zip(budgets, correct, strict=True)]
    placeholder = torch.tensor([budget if b is None else b for b in budgets])  # rows without a budget: None below
    reward = budget_reward(lengths, placeholder, torch.tensor([bool(c) for c in correct]), max_len=budget,
                           alpha=alpha, beta=beta)
    return [float(r) if k else None for r, k in zip(reward.tolist(), known)]
