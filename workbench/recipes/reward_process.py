"""F6 reward recipes, process and judgement rewards: flawed positives (FAPO), checklists (CM2), meta-reasoning step
rewards (RLVMR), milestones (RL4MLE), tiered sweet-spot rewards (SSL), a mixture of judges (CGPO).

Each is GRPO-based unless its paper says otherwise. Where the reward already holds the task's verdict (FAPO's
+-1, CM2's answer item, the milestone and tier rewards give a solved run the top reward) the environment's
verifier is left out (task_reward = 0). The multi-turn ones (cm2-checklist, rlvmr, rl4mle-milestones) run on any
task: a one-turn episode is one step without tool calls.
"""
from workbench.recipes.base import Recipe, define, use
from workbench.recipes.canonical import GRPO


define(Recipe(
    key="fapo", title="FAPO: Flawed-Aware Policy Optimization for Efficient and Reliable Reasoning",
    summary="Rule reward +-1 with flawed positives (correct answers whose steps a detector flags) set to 0, on "
            "FAPO's DAPO-style run (yyDing1/FAPO scripts/run_fapo_reasoning_7b.sh): clip 0.2/0.28, token mean, "
            "soft overlong punishment over the last half of the budget (the script's 4096 of 8192 tokens: buffer 5 "
            "of the default max_new_tokens 10; the buffer is in tokens, set it to L/2 for another budget L), no KL.",
    advantage=["grpo"], objective=use("ppo-clip", eps_low=0.2, eps_high=0.28), agg="token-mean",
    rewards=[use("fapo", weight=1.0), use("soft-overlong", weight=1.0, buffer=5)], task_reward=0.0))

define(Recipe(
    key="cm2-checklist",
    title="CM2: Reinforcement Learning with Checklist Rewards for Multi-Turn and Multi-Step Agentic Tool Use",
    summary="GRPO on the checklist reward in [0, 1] (items paid once at their first satisfying step, dependencies "
            "respected; the paper's final recipe uses the trajectory level), judged by the rule-based toy judge.",
    **GRPO,
    rewards=[use("cm2-checklist", weight=1.0)], task_reward=0.0))

define(Recipe(
    key="rlvmr",
    title="RLVMR: Reinforcement Learning with Verifiable Meta-Reasoning Rewards for Robust Long-Horizon Agents",
    summary="Episode advantage (0.1 off invalid steps) plus w = 1 x meta-reasoning step rewards normalized per "
            "(task, tag), k3 KL 0.01 and entropy bonus 0.001 (the run script); the reward `rlvmr` is logged only "
            "(weight 0): the meta rewards act through the step advantage.",
    advantage=[use("rlvmr", w=1.0, mode="mean_std_norm", invalid_penalty=0.1)], agg="token-mean",
    regularizers=[use("kl-penalty", beta=0.01, estimator="k3"), use("entropy-bonus", coef=0.001)],
    rewards=[use("rlvmr", weight=0.0)]))

define(Recipe(
    key="rl4mle-milestones", title="Reinforcement Learning for Machine Learning Engineering Agents",
    summary="GRPO on the final score of solved runs and milestone partial credit (sum 0.6 at most) of the others; "
            "calculator milestones are the expert's intermediate results.",
    **GRPO,
    rewards=[use("rl4mle-milestones", weight=1.0)], task_reward=0.0))

define(Recipe(
    key="ssl", title="SSL: Sweet Spot Learning for Differentiated Guidance in Agentic Optimization",
    summary="GRPO on the tiered sweet-spot reward (K = 4 Gaussian distance zones) in place of the binary verdict.",
    **GRPO,
    rewards=[use("ssl", weight=1.0, signal="distance", K=4)], task_reward=0.0))

define(Recipe(
    key="cgpo", title="The Perfect Blend: Redefining RLHF with Mixture of Judges",
    summary="CRPG: GRPO on the calibrated reward sigma(r - group mean), -1 for samples a judge flags (format, "
            "length, prompt copying); CRRAFT / CODPO select data for sft / dpo and are not trainers here.",
    **GRPO,
    reward_shaping=[use("cgpo", judges=("format", "length", "copy"))]))
