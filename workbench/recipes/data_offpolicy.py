"""F5 recipes, data that teaches (off-policy reuse): ReMix's mix-policy replay and DART's adaptive data curation."""
from workbench.recipes.base import Recipe, define, use
from workbench.objectives.remix import REMIX_TITLE
from workbench.masks.dart import DART_TITLE

# ReMix (arXiv 2507.06892): no code or config located, the abstract gives the mechanisms only; the settings are the
# catalog card's decisions. GRPO's advantage and aggregation; a buffer of the last k = 2 steps' groups added at share
# p = 0.5 of the batch, each row clipped to its own behaviour policy (eps 0.2), UTD = 2 optimizer steps per minibatch;
# KL-Convex lam = 0.5 with k2 for both terms at GRPO's beta 0.04; policy reincarnation half-way (the schedule drives
# the reference's step, the transform turns the replay off from the same step: both at = 0.5).
REINCARNATE_AT = 0.5
define(Recipe(
    key="remix", title=REMIX_TITLE,
    summary="GRPO advantages on a mix of fresh groups and groups replayed from the last 2 steps (half the batch), "
            "each clipped to its own behaviour policy pi / mu, 2 optimizer steps per minibatch, KL-Convex "
            "0.5 KL(base) + 0.5 KL(precedent); half-way the base becomes the policy and training goes on-policy.",
    group_transforms=[use("remix", k=2, p=0.5, reincarnate_at=REINCARNATE_AT)],
    advantage=["grpo"], objective=use("remix", utd=2, eps_low=0.2, eps_high=0.2), agg="seq-mean-token-mean",
    regularizers=[use("remix", beta=0.04, lam=0.5, estimator="k2")],
    reference=use("remix"), schedules=[use("remix", at=REINCARNATE_AT, into="reference:remix.reincarnate_step")]))

# DART-GUI (Computer-use-agents/dart-gui @ e0e606d3,
# examples/osworld/async/run_trainer_debug_w_rollout_stepwise_train_pt.sh with verl/trainer/config/
# ppo_trainer_osworld.yaml): GRPO advantages, rollout n = 8 (the preset's group_size is n_max), clip 0.1 / 0.28, dual
# clip c = 10, seq-mean-token-mean, KL loss 0.1 with low_var_kl (k3), use_vllm_logp with the TIS weight
# min(pi_old / mu, 1) (compute_policy_loss; our `tis` with cap 1), use_sft_loss False (not implemented here). The
# script's loss_mode is gspo; the card's (and compute_policy_loss's) token-level PPO loss is used. The card's decisions:
# n(p_hat) from n_max down to n_min = 2 between success rates 0.2 and 0.8, entropy filter 0.5. A fixed pool of prompts,
# as DART trains on a fixed task set, so success rates per prompt accumulate.
define(Recipe(
    key="dart", title=DART_TITLE,
    summary="GRPO on a fixed pool with DART's curation: each prompt sampled n(p_hat) times (G below a 0.2 success "
            "rate, 2 above 0.8), only the half of trajectories with the highest mean entropy trained, and the "
            "token loss weighted by the truncated IS weight min(pi_old / mu, 1).",
    sampler=use("pool", size=64), rollout=use("dart", n_min=2, low=0.2, high=0.8),
    advantage=["grpo"], token_masks=[use("dart", entropy_filter=0.5)],
    objective=use("tis", mode="token_truncate", cap=1.0, eps_low=0.1, eps_high=0.28, dual_clip_c=10.0),
    agg="seq-mean-token-mean", regularizers=[use("kl-penalty", beta=0.1, estimator="k3")]))
