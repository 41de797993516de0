"""F5 recipes, rollout control: how many turns, branches and samples a rollout takes."""
from workbench.advantages.aepo_clip import AEPO_TITLE
from workbench.advantages.xrpo import XRPO_TITLE
from workbench.recipes.base import Recipe, define, use
from workbench.recipes.entropy_control import LOW_VAR_KL
from workbench.rollout.arpo import ARPO_TITLE
from workbench.schedules.scalinginter import BABYAI_ROUNDS, STEPS_SCALING_INTER, TITLE as SCALINGINTER_TITLE
from workbench.tasks.guidance import TOY_SOLUTION

# AgentGym-RL @ 82402a9, examples/train/ScalingInter-RL/babyai_train.sh with verl's ppo_trainer.yaml defaults: GRPO
# (gamma = lam = 1 are implicit: the outcome z-score has no discounting), clip 0.2, token mean, low_var_kl 0.001 in the
# loss (use_kl_loss=True, so no KL in the reward), entropy_coeff 0.001 (the yaml's; the scripts keep it). K stays the
# reference's 100 steps per stage, so a run shorter than 100 steps (the smoke preset) never leaves rounds[0]; a short
# run sets it with --set recipe_overrides.schedules.every=N (the tests use every=1 or 2).
define(Recipe(
    key="scalinginter-rl", title=SCALINGINTER_TITLE,
    summary="GRPO whose episodes are capped at h(t) = rounds[min(t // K, n - 1)] turns (BabyAI's [6, 13, 20], "
            "K = 100 steps): short horizons first, longer ones as training goes on. Clip 0.2, token mean, k3 KL "
            "0.001 (clamped at 10) and entropy bonus 0.001 in the loss; the scripts train 2 epochs per batch in 4 "
            "minibatches (--set ppo_epochs=2 minibatches=4). Needs a multi-turn task.",
    advantage=[use("grpo", allow_singletons="keep")],  # verl: a one-sample group has mean 0, std 1 (A = R)
    agg="token-mean",
    regularizers=[use("kl-penalty", beta=0.001, **LOW_VAR_KL), use("entropy-bonus", coef=0.001)],
    schedules=[use("scalinginter-rl", into="rollout:turns.max_turns", rounds=BABYAI_ROUNDS,
                   every=STEPS_SCALING_INTER)]))

define(Recipe(
    key="xrpo", title=XRPO_TITLE,
    summary="XRPO: 2 samples per prompt, the rest of the G-per-prompt budget in 2 rounds to the prompts of highest "
            "priority (CI shrinkage + lambda 0.1 exploration bonus), solved exemplars in context for prompts with "
            "no success; GRPO plus the novelty-sharpening advantage (lambda 1, kappa 0.5), k3 KL." + TOY_SOLUTION,
    # secondary sources only (no official code): the rollout half's constants and the sharpening half's are the
    # catalog's start values; the KL as the grpo recipe's
    rollout="xrpo", advantage=[use("grpo", allow_singletons=True), use("xrpo-sharpening", lam=1.0, kappa=0.5)],
    agg="seq-mean-token-mean", regularizers=[use("kl-penalty", beta=0.04, estimator="k3")]))

# dongguanting/ARPO @ e257337, ARPO/scripts/ARPO_7B_Reasoning_1node.sh (the 8B / 14B deep-search scripts alike) with
# scripts/config/ppo_trainer.yaml: GRPO (norm_adv_by_std_in_grpo, verl's one-sample group A = R), KL 0 in the reward
# and in the loss, entropy_coeff 0, clip 0.2 / 0.2 with verl's dual clip c = 3, token-mean; rollout n 16, initial 8
# (group_size // 2), beam 2, tau 0.5, entropy_weight 0.2 (the code's default is 0.5); lr 1e-6, temperature 1, top-p 1.
define(Recipe(
    key="arpo-agentic", title=ARPO_TITLE,
    summary="GRPO over entropy-branched tool rollouts: per prompt G/2 global rollouts, then after each tool response "
            "a trajectory branches (environment copied) with P = clip(0.5 + 0.2 dH, 0, 1) until the group has G "
            "rows. Clip 0.2 with dual clip 3, token mean, no KL; the scripts train at lr 1e-6 (--set lr=1e-6). "
            "Needs a multi-turn task with copyable environments.",
    rollout=use("arpo-agentic", entropy_weight=0.2), advantage=[use("grpo", allow_singletons="keep")],
    objective=use("ppo-clip", eps_low=0.2, eps_high=0.2, dual_clip_c=3.0), agg="token-mean"))

# AEPO: no code located (the paper points to the ARPO repository). Its rollout on ARPO's settings, and its loss half
# exactly as the `aepo-agentic-clip` recipe (workbench/recipes/token_shaping.py): grpo then the entropy-aware
# advantage, the entropy-balanced clip, token-mean, no KL.
define(Recipe(
    key="aepo-agentic", title=AEPO_TITLE,
    summary="ARPO's branching rollout with the budget split by entropy pre-monitoring (m = k sigma(H_root - "
            "H_tool) global rollouts) and branch probability damped by 0.5 per consecutive branch on a path, "
            "trained with AEPO's entropy-balanced clip and entropy-aware advantage; token mean, no KL; lr 1e-6 in "
            "ARPO's scripts (--set lr=1e-6). Needs a multi-turn task with copyable environments.",
    rollout=use("aepo-agentic", entropy_weight=0.2), advantage=["grpo", "aepo-agentic-clip"],
    objective="aepo-agentic-clip", agg="token-mean"))
