"""F6 recipes on search and mode decisions: AdaSearch's search-or-not reward, ACT's critic reward, A^2FM's APO.

Each is GRPO (group z-score, PPO clip, per-sequence token mean, k3 KL 0.04 in the loss) with the method's reward.
On a one-turn task (no tool) they still train: AdaSearch's rows all answer parametrically, A^2FM's modes differ
only by their tag and length, ACT's reward applies to critic rows only (`--task act`) and the verifier trains the
rest.
"""
from workbench.recipes.base import Recipe, define, use
from workbench.recipes.canonical import GRPO


define(Recipe(
    key="adasearch",
    title="AdaSearch: Balancing Parametric Knowledge and Search in Large Language Models via Reinforcement Learning",
    summary="GRPO on r = 1[search decision = oracle] + EM, no tool-call penalty; the oracle (solvable without "
            "search) from a parametric_correct column or, toy stand-in, a no-search row of the same prompt being "
            "right. The reward holds the accuracy term, so the verifier's own weight is 0.",
    rewards=[use("adasearch", weight=1.0)], task_reward=0.0, **GRPO))

define(Recipe(
    key="act", title="Agentic Critical Training",
    summary="GRPO on the judge reward 1[choice = expert action] over two candidates in random order (--task act: "
            "grid-world expert moves vs worse moves). Verifier and reward weigh 0.5 each: on the critic task they "
            "are the same check (the sum is r), elsewhere the reward is None and the verifier trains.",
    rewards=[use("act", weight=0.5)], task_reward=0.5, **GRPO))

define(Recipe(
    key="apo-a2fm",
    title="A^2FM: An Adaptive Agent Foundation Model for Tool-Aware Hybrid Reasoning",
    summary="APO: every group sampled in all three modes (instant / reasoning / agentic, forced by a prompt tag), "
            "rewarded acc (1 - 0.1 min(cost / cost_max, 1)), cost = tokens + 10 per tool call; the reward holds the "
            "accuracy term, so the verifier's own weight is 0.",
    rollout=use("apo-a2fm"), rewards=[use("apo-a2fm", weight=1.0)], task_reward=0.0, **GRPO))
