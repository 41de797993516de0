"""F5 recipes, rollout control: how many turns, branches and samples a rollout takes."""
from workbench.recipes.base import Recipe, define, use
from workbench.recipes.entropy_control import LOW_VAR_KL
from workbench.schedules.scalinginter import BABYAI_ROUNDS, STEPS_SCALING_INTER, TITLE as SCALINGINTER_TITLE

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
