"""F5 recipes, hybrid on/off-policy training: external demonstrations trained beside the policy's own samples."""
from workbench.advantages.rl_plus import RL_PLUS_TITLE
from workbench.recipes.base import Recipe, define, use

define(Recipe(
    key="rl-plus", title=RL_PLUS_TITLE,
    summary="RL-PLUS: one of the G responses per prompt is the task's reference solution; advantage R minus the mean "
            "of the on-policy samples, no std; unclipped -A r on sampled tokens, the MIS ratio "
            "2 pi / (pi_old + (pi_old + 1)/2) times A (1 - sg pi)^0.5 on the reference's; constant-normalized token "
            "sum, entropy bonus 0.001, no KL.",
    # YihongDong/RL-PLUS @ eb4aa4d, exp_scripts/train_RL-PLUS.sh:
    #   rollout: n=8 (L56) with n_prefix=1 (L75) and min/max_prefix_ratio=1.0 (L76-77): one of the G rows is the whole
    #     external solution -> rollout `policy-shaping` (G - 1 samples + the reference solution)
    #   advantage: grpo_use_std=False (L84), no std. The script's adv_estimator=grpo (L30) puts the external row in
    #     the baseline; the catalog's on-policy-only baseline (`grpo_split`) is the default, baseline_rows="all" the
    #     script's
    #   objective: off_policy_strategy=RL-PLUS (L9, L82), loss_remove_clip=True (L86): no clip on sampled tokens
    #   agg: loss_remove_token_mean=True (L85): token sum over a constant (L_max), Dr.GRPO's seq-mean-token-sum-norm
    #   regularizers: entropy_coeff=0.001 (L61); no KL: use_kl_loss=False (L71), kl_loss_coef=0.00 (L44),
    #     algorithm.kl_ctrl.kl_coef=0.000 (L60)
    rollout="policy-shaping", advantage=["rl-plus"], objective="rl-plus", agg="seq-mean-token-sum-norm",
    regularizers=[use("entropy-bonus", coef=0.001)]))
