"""Multi-turn agent recipes: trained over environments with tools (`--task calculator | search | gridworld`).

Every RL recipe runs on a multi-turn environment as it is (the rollout strategy `turns` plays whole episodes and
masks the observation tokens); the recipes here are the ones whose advantage needs the episode's structure.
"""
from workbench.recipes.base import Recipe, define, use

define(Recipe(
    key="gigpo", title="Group-in-Group Policy Optimization for LLM Agent Training",
    summary="Episode-level group z-score plus omega x the step return normalized over anchor states: every step "
            "of the prompt group's episodes that acted from the same environment state (verl-agent defaults: "
            "omega 1, gamma 0.95); PPO clip, token mean, k3 KL 0.01 in the loss.",
    advantage=[use("gigpo", omega=1.0, gamma=0.95)], agg="token-mean",
    regularizers=[use("kl-penalty", beta=0.01, estimator="k3")]))
