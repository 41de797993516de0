"""Group sampling: G responses per prompt, scored by the task, as one RolloutBatch.

A one-turn case of the multi-turn rollout (`workbench.rollout.turns`), kept as the call the training loop
and the tests know: same rows, tokens, masks, log-probs and rewards.
"""
from __future__ import annotations

from workbench.batch import RolloutBatch
from workbench.rollout.engine import Sampling
from workbench.rollout.turns import turns
from workbench.tasks import Example, Task


def sample_groups(engine, task: Task, examples: list[Example], *, group_size: int, max_new_tokens: int,
                  temperature: float = 1.0, top_p: float = 1.0, stop: list[str] | None = None) -> RolloutBatch:
    """Rows are grouped: row i answers examples[i // group_size]. Rewards come from the task's verifier, on
    texts cut after the first `stop` string (kept), the same tokens the trainer scores. A multi-turn task runs
    whole episodes, with `max_new_tokens` per turn."""
    sampling = Sampling(max_new_tokens, temperature=temperature, top_p=top_p, stop=tuple(stop) if stop else None)
    return turns(engine, task, examples, group_size=group_size, sampling=sampling)


def subgroup_sizes(group_size: int, k: int, *, who: str, what: str) -> list[int]:
    """G rows split into k subgroups as evenly as possible, the first G mod k taking one more (HBPO's budgets,
    A^2FM's modes); a group too small to give each subgroup a row is refused, naming `who` and its k `what`."""
    if group_size < k:
        raise ValueError(f"{who} splits each group into {k} subgroups ({what}): group_size must be >= {k}, got "
                         f"{group_size}")
    return [group_size // k + (j < group_size % k) for j in range(k)]
