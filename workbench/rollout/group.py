"""Group sampling: G responses per prompt, scored by the task, as one RolloutBatch."""
from __future__ import annotations

import torch

from workbench.batch import RolloutBatch
from workbench.tasks import Example, Task


def sample_groups(engine, task: Task, examples: list[Example], *, group_size: int, max_new_tokens: int,
                  temperature: float = 1.0, top_p: float = 1.0, stop: list[str] | None = None) -> RolloutBatch:
    """Rows are grouped: row i answers examples[i // group_size]. Rewards come from the task's verifier, on
    texts cut after the first `stop` string (kept), the same tokens the trainer scores."""
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    gen = engine.generate([e.prompt for e in examples], n=group_size, max_new_tokens=max_new_tokens,
                          temperature=temperature, top_p=top_p, stop=stop)
    rows = [e for e in examples for _ in range(group_size)]
    rewards = torch.tensor(task.rewards(gen.texts, rows), dtype=torch.float32)
    return RolloutBatch(
        response_ids=gen.response_ids, mask=gen.mask, group=torch.arange(len(examples)).repeat_interleave(group_size),
        rewards=rewards, prompt_ids=gen.prompt_ids, prompt_mask=gen.prompt_mask, mu_logp=gen.mu_logp,
        truncated=gen.truncated, completions=gen.texts, prompts=[e.prompt for e in rows])
