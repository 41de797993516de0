"""ReMax's baseline: the reward of one greedy rollout per prompt, as a group transform."""
from __future__ import annotations

from dataclasses import replace

from workbench import registry


@registry.group_transform(
    "greedy-baseline", title="ReMax: A Simple, Effective, and Efficient Reinforcement Learning Method for "
                             "Aligning Large Language Models", family="canonical",
    summary="One greedy rollout per prompt; its reward fills batch.baseline_rewards for every sample of the group.",
    equation=r"b_i = R(x, \bar y),\quad \bar y = \arg\max \pi_\theta(\cdot \mid x) \text{ (greedy)}",
    provides=("baseline_rewards",))
def greedy_baseline(batch, ctx):
    """Reads `group` ([B] ids of `ctx.examples`, the step's examples); the greedy episodes run through the same
    rollout strategy and environment as the samples, and their reward is the environment's (no shaping)."""
    greedy = ctx.rollout(ctx.examples, group_size=1, greedy=True)
    baseline = greedy.rewards.to(batch.rewards.dtype)  # [n_prompts]
    return replace(batch, baseline_rewards=baseline[batch.group])
