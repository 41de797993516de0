"""HBPO's hierarchical budget rollout: each group of G samples is split into k budget subgroups, and every row of
subgroup j sees its prompt with "I will answer the question within b_j tokens" appended.

The rows keep their example's group id (the G rows of an example stay one group, subgroups in budget order), so a
group baseline compares across budgets (HBPO's inter-group term) and `hbpo-reward` reads each row's budget back
from its prompt. Everything else is the `turns` rollout: the budget sentence is added by wrapping the task's
environment, whose reset appends it to the opening user message; env seeds are the plain rollout's
(`episode_seed(example, index in group)`), so an env with random dynamics replays as it would without budgets.

Budgets default to fractions (0.125, 0.25, 0.5, 0.625) of the run's `max_new_tokens`: our reading, the paper's
budgets {512, 1024, 2048, 2560} over its 4096-token context (L_max, which `hbpo-reward` takes from max_new_tokens),
scaled to toy runs that generate a handful of tokens. Every budget stays below L_max, so every subgroup's right
answers earn f2(b) > 0 (a budget b = L_max would pay cos(pi/2) = 0, right or wrong). The generation cap stays
`max_new_tokens` for every row: HBPO's budgets are announced, not enforced (the reward penalizes the overrun).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from workbench import registry
from workbench.envs.base import Env
from workbench.episodes import episode_seed
from workbench.rewards.hbpo import BUDGET_SENTENCE, HBPO_TITLE, budget_of
from workbench.rollout.group import subgroup_sizes
from workbench.rollout.turns import TURNS_PROVIDES, turns

FRACTIONS = (0.125, 0.25, 0.5, 0.625)  # of max_new_tokens: the paper's 512/1024/2048/2560 of a 4096 context
TEMPLATE = "{prompt}\n" + BUDGET_SENTENCE + ".\n"


@dataclass(frozen=True)
class Budgeted:
    """One row to roll out: its example, its budget, and its sample index within the example's group."""

    example: object
    budget: int
    index: int


def with_budget(messages: list[dict], budget: int, template: str) -> list[dict]:
    """The opening messages with the budget sentence put into the last user message (`template`)."""
    messages = [dict(m) for m in messages]
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    if not users:  # nothing to append to: the sentence becomes the user's message
        return messages + [{"role": "user", "content": template.format(prompt="", budget=budget).lstrip("\n")}]
    last = messages[users[-1]]
    last["content"] = template.format(prompt=last.get("content") or "", budget=budget)
    return messages


class BudgetEnv(Env):
    """The task's environment with the row's budget announced in its opening message."""

    def __init__(self, env: Env, template: str):
        self.env, self.template = env, template
        self.stop, self.max_turns = env.stop, env.max_turns

    def reset(self, row: Budgeted, seed: int | None = None):
        # the plain rollout's seed for this row (turns passes one derived from the Budgeted row)
        messages, info = self.env.reset(row.example, episode_seed(row.example, row.index))
        return with_budget(messages, row.budget, self.template), info

    def step(self, action: str):
        return self.env.step(action)


class BudgetTask:
    """`task` whose environments announce budgets; every other attribute is the task's."""

    def __init__(self, task, template: str):
        self.task, self.template = task, template

    def make_env(self) -> BudgetEnv:
        return BudgetEnv(self.task.make_env(), self.template)

    def __getattr__(self, name):
        return getattr(self.task, name)


def check_budgets(budgets=None, fractions=FRACTIONS) -> None:
    """The budgets, or (budgets=None) the fractions of max_new_tokens they are made of."""
    if budgets is not None:
        if not budgets or any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in budgets):
            raise ValueError(f"hbpo-reward: budgets must be a non-empty list of ints >= 1, got {budgets!r}")
    elif not fractions or any(not f > 0 for f in fractions):
        raise ValueError(f"hbpo-reward: fractions must be a non-empty list of numbers > 0, got {fractions!r}")


def budgets_for(max_new_tokens: int, budgets=None, fractions=FRACTIONS) -> tuple[int, ...]:
    """`budgets` as given, or round(f * max_new_tokens) (half up, at least 1) for each fraction f; every budget in
    [1, max_new_tokens] (the reward's L_max: a longer budget could never be met)."""
    check_budgets(budgets, fractions)
    if budgets is not None:
        chosen = tuple(budgets)
    else:
        chosen = tuple(max(1, int(f * max_new_tokens + 0.5)) for f in fractions)
    if max(chosen) > max_new_tokens:
        raise ValueError(f"hbpo-reward: budgets {chosen} exceed max_new_tokens = {max_new_tokens} (L_max of the "
                         "reward); pass budgets <= max_new_tokens (fractions <= 1), or raise max_new_tokens")
    return chosen


def check_template(template: str) -> None:
    try:
        probe = template.format(prompt="", budget=7)
    except (KeyError, IndexError, ValueError) as err:
        raise ValueError(f"hbpo-reward: template must be a format string with {{prompt}} and {{budget}}, got "
                         f"{template!r} ({err})") from None
    if "{prompt}" not in template or budget_of(probe) != 7:
        raise ValueError(f"hbpo-reward: template must contain {{prompt}} and the budget sentence "
                         f"{BUDGET_SENTENCE!r}, got {template!r}")


def check_hbpo_rollout(*, budgets=None, fractions=FRACTIONS, template=TEMPLATE, **_) -> None:
    """What can be checked before the run's max_new_tokens is known."""
    check_template(template)
    check_budgets(budgets, fractions)


@registry.rollout(
    "hbpo-reward", title=HBPO_TITLE,
    summary="Each group of G samples split into budget subgroups (1/8, 1/4, 1/2, 5/8 of max_new_tokens), each "
            "prompt appended 'I will answer the question within b tokens'; rows keep their example's group.",
    equation=r"\{y_{i,j}\}_{j \le G/k} \sim \pi(\cdot \mid x \oplus \text{``within } b_i \text{ tokens''}),"
             r"\ b_i \in \{b_1, \dots, b_k\}",
    reads=(), provides=TURNS_PROVIDES, check=check_hbpo_rollout)
def hbpo_rollout(engine, task, examples, *, group_size: int, sampling, ctx=None, budgets=None, fractions=FRACTIONS,
                 template=TEMPLATE):
    """The `turns` rollout of G rows per example, subgroup j (G/k rows, `subgroup_sizes`) prompted with budget b_j
    (`budgets_for`); row i of the batch still answers examples[i // G] (`group`).

    template: how the sentence joins the prompt ({prompt}, {budget}); it must contain the budget sentence so that
    `hbpo-reward` can read the budget back. Default: on a new line after the prompt (the paper puts it after the
    opening reasoning tag, which the toy tasks do not have: our reading).
    """
    check_template(template)
    chosen = budgets_for(sampling.max_new_tokens, budgets, fractions)
    sizes = subgroup_sizes(group_size, len(chosen), who="hbpo-reward",
                           what=f"budgets {chosen}; pass fewer budgets or fractions")
    rows = []
    for example in examples:
        index = 0
        for budget, size in zip(chosen, sizes):
            rows += [Budgeted(example, budget, index + s) for s in range(size)]
            index += size
    batch = turns(engine, BudgetTask(task, template), rows, group_size=1, sampling=sampling)
    batch.group = torch.arange(len(examples), device=batch.group.device).repeat_interleave(group_size)
    return batch
