"""F2/F3 recipes, token-heterogeneous surrogates: HAPO (and its adaptive temperature alone), AEPO's entropy-balanced
clipping, LUFFY's policy shaping of off-policy tokens."""
from workbench.advantages.aepo_clip import AEPO_TITLE
from workbench.advantages.hapo import HAPO_TITLE
from workbench.objectives.policy_shaping import LUFFY_TITLE
from workbench.recipes.base import Recipe, define, use

define(Recipe(
    key="hapo", title=HAPO_TITLE,
    summary="Adaptive-temperature sampling (tau 0.05), token-level group average advantage, entropy-adaptive "
            "asymmetric clipping and advantage redistribution (alpha = beta = 1, eps 0.2 / 0.2, dual clip 10), "
            "token-mean loss, DAPO's dynamic sampling and soft overlong penalty, no KL.",
    # HAPO's recipes/qwen2.5_math_7b.sh: no KL, token-mean, filter_groups (dynamic sampling), overlong buffer.
    # The rollout's mu_logp (at T_t, |T_t / T - 1| <= 5 %) is not importance-corrected, as in HAPO; the mismatch
    # shows in mismatch/*, and --set rollout_is=token_truncate corrects it if it grows.
    rollout="hapo-temperature", advantage=["hapo"], objective="hapo", agg="token-mean",
    rewards=[use("soft-overlong", buffer=4)], group_transforms=[use("dynamic-sampling", max_rounds=3)]))

define(Recipe(
    key="hapo-temperature", title=HAPO_TITLE,
    summary="GRPO sampled at HAPO's per-token temperature T (1 + 0.05 h_hat): hotter at high-entropy forks, "
            "cooler on confident tokens; everything else as the grpo recipe.",
    rollout="hapo-temperature", advantage=["grpo"], agg="seq-mean-token-mean",
    regularizers=[use("kl-penalty", beta=0.04, estimator="k3")]))

define(Recipe(
    key="aepo-agentic-clip", title=AEPO_TITLE,
    summary="GRPO advantage scaled by (1 + 0.1 clipped entropy z-score); PPO clip whose clipped high-entropy "
            "tokens (top 20 %, A > 0) keep a (1 + eps_high) grad log pi gradient; token-mean, no KL.",
    # ARPO's scripts (the code AEPO builds on): grpo, token-mean, clip 0.2 / 0.2, KL coefficient 0
    advantage=["grpo", "aepo-agentic-clip"], objective="aepo-agentic-clip", agg="token-mean"))

define(Recipe(
    key="policy-shaping", title=LUFFY_TITLE,
    summary="LUFFY: one of the G responses per prompt is the task's reference solution, trained through "
            "-A p/(p + 0.1) without ratio or clip; group-mean advantage without std, constant-normalized token "
            "sum, entropy bonus 0.001, no KL.",
    # LUFFY exp_scripts/train.sh: adv_estimator=grpo with grpo_use_std=False, loss_remove_token_mean=True (a
    # constant divisor), entropy_coeff=0.001, no KL, n_prefix=1 with prefix ratio 1
    rollout="policy-shaping", advantage=[use("grpo", scale="none")], objective="policy-shaping",
    agg="seq-mean-token-sum-norm", regularizers=[use("entropy-bonus", coef=0.001)]))
