"""F2 recipes: trust regions other than PPO's fixed clip (BAPO, GBPO, R²VPO, DOTS's replay-aware clip).

BAPO, R²VPO and DOTS differ from PPO only after the first minibatch of a step (r = 1 there), so they show their
behaviour with several optimizer steps per batch: `--set ppo_epochs=2` or `--set minibatches=2`. GBPO differs already
at r = 1: its target ratio splits the group at the median reward, not the mean.
"""
from workbench.recipes.base import Recipe, define, use

define(Recipe(
    key="bapo", title="BAPO: Stabilizing Off-Policy Reinforcement Learning for LLMs via Balanced Policy Optimization "
                      "with Adaptive Clipping",
    summary="GRPO advantages; dual-clip PPO whose bounds (c_low 0.6->0.8, c_high 1.2->2.0) are raised per minibatch "
            "until positive tokens carry half the loss; token-level loss, no KL. Meant for off-policy updates "
            "(--set ppo_epochs=2 or minibatches > 1): at r = 1 the bounds change nothing.",
    advantage=["grpo"], objective="bapo", agg="token-mean"))

define(Recipe(
    key="gbpo", title="Bounded Ratio Reinforcement Learning",
    summary="GRPO z-score weights and a median-split target ratio in [0.8, 1.2]; the loss regresses each token "
            "ratio to its target (|r - rho*| |A|); token-level loss, k3 KL 0.001 in the loss (the reference's "
            "TTRL scripts).",
    advantage=["gbpo"], objective="gbpo", agg="token-mean",
    regularizers=[use("kl-penalty", beta=0.001, estimator="k3")]))

define(Recipe(
    key="r2vpo", title="Ratio-Variance Regularized Policy Optimization for Efficient LLM Fine-tuning",
    summary="GRPO advantages; unclipped IS surrogate plus lam (r - 1)^2, lam by dual ascent on the measured ratio "
            "variance (budget 0.02); stale samples weighted min(pi_old/mu, 2). Meant for --set ppo_epochs=2 or "
            "minibatches > 1 (with one optimizer step per batch r = 1 and lam only decays).",
    advantage=["grpo"], objective="r2vpo", agg="token-mean",
    controllers=[use("r2vpo", into="objective:r2vpo.lam")]))

define(Recipe(
    key="dots-rr-clip", title="Improving Data Efficiency for LLM Reinforcement Fine-tuning Through "
                              "Difficulty-targeted Online Data Selection and Rollout Replay",
    summary="GRPO advantages; PPO clip (0.2) around pi_old times the behaviour weight pi_old/mu, token-level loss. "
            "On fresh rollouts mu = pi_old up to engine mismatch, so it is ppo-clip until replayed rows (stale mu) "
            "enter the batch.",
    advantage=["grpo"], objective="dots-rr-clip", agg="token-mean"))
