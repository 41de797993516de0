"""F5 recipes, hybrid on/off-policy training: external demonstrations trained beside the policy's own samples."""
from workbench.advantages.rl_plus import RL_PLUS_TITLE
from workbench.recipes.base import Recipe, define, use
from workbench.transforms.ampo import AMPO_TITLE
from workbench.tasks.guidance import TOY_SOLUTION, TOY_TEACHER

define(Recipe(
    key="rl-plus", title=RL_PLUS_TITLE,
    summary="RL-PLUS: one of the G responses per prompt is the task's reference solution; advantage R minus the mean "
            "of the on-policy samples, no std; unclipped -A r on sampled tokens, the MIS ratio "
            "2 pi / (pi_old + (pi_old + 1)/2) times A (1 - sg pi)^0.5 on the reference's; constant-normalized token "
            "sum, entropy bonus 0.001, no KL." + TOY_SOLUTION,
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

define(Recipe(
    key="ampo", title=AMPO_TITLE,
    summary="AMPO: a group whose samples all fail gets up to 2 teacher solutions (of a pool of 4 exact solvers) in "
            "place of failed samples, those whose reasoning most raises the policy's probability of the answer; "
            "on-policy-only group z-score (std 0 read as 1); teacher tokens trained by -A p/(p + 0.1), sampled ones "
            "by dual-clip PPO (0.2 / 0.2, c = 10); constant-normalized token sum, entropy bonus 0.001, no KL."
            + TOY_TEACHER,
    # SII-Enigma/AMPO @ b88d365, exp_scripts/train_ampo.sh:
    #   group_transforms: injection_strategy='adaptive' (L35) with the code's threshold 1/n (mix_dapo_trainer.py
    #     L1391): only groups without a correct sample; num_off_policy_targets=2 (L25) -> k=2;
    #     max_available_targets=4 (L26) -> a pool of 4 teachers; target_selection_strategy='best_k' (L36) scored by
    #     off_policy_reward_manager='prob' (L42), compute_score_name=mean_exp_log_softmax (L181), shaping threshold_0
    #     (L180), format_coefficient=0.1 (L186); min/max_prefix_ratio=1.0 (L161-162): whole solutions; rollout
    #     temperature=1.0 (L68). reward_manager='naive' (L43) leaves scoreA at 0: score_a="zero" is the script's
    #   advantage: prefix_reward_weight_alpha=1.0 (L163), beta the config's 1.0. The script's adv_estimator=grpo (L46)
    #     with norm_adv_by_std_in_grpo=False (L113) puts the teachers in the baseline without std: baseline_rows="all",
    #     norm_by_std=False; the catalog's on-policy-only z-score (`grpo_split`) is the default
    #   objective: off_policy_reshape="p_div_p_0.1" (L31), clip_ratio_low/high=0.2 (L48-49), loss_remove_clip=False
    #     (L34), clip_ratio_c=10.0 (L121): dual clip on the sampled tokens; off_policy_loss_impl='seq' (L32) only splits
    #     the logged off-policy loss per teacher (the per-token loss is the same)
    #   agg: loss_remove_token_mean=True (L33): token sum / L, Dr.GRPO's seq-mean-token-sum-norm
    #   regularizers: entropy_coeff=0.001 (L139; the script aggregates it token-mean, L57, ours with the recipe's agg,
    #     which the pipeline passes to every loss term); no KL: use_kl_in_reward=False, kl_coef=0.0 (L88-89),
    #     use_kl_loss=False, kl_loss_coef=0.0 (L90-91), ref.use_ref=False (L164)
    #   run settings, not the recipe's: n_resp_per_prompt=8 (L61) is group_size, lr=1e-6 (L133), grad_clip=1.0 (L140)
    group_transforms=[use("ampo")], advantage=["ampo"], objective=use("policy-shaping", dual_clip_c=10.0),
    agg="seq-mean-token-sum-norm", regularizers=[use("entropy-bonus", coef=0.001)]))
