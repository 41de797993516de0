"""F8 recipe, search self-play (SSP): one policy poses search questions for itself and answers them.

Trained on the proposer's task (`--task search-propose`): the step's rollout is the proposer's (P answers x G
proposals), the group transform `ssp` solves every valid question n = 5 times with the same policy and rewards the
proposer 1 - p; GRPO then normalizes each proposer group and each solver group, and one update trains both roles.

Alibaba-Quark/SSP @ b4797e1, `examples/train_ssp.sh`: adv_estimator grpo (norm by std), rollout.n 5 (the solver's
attempts), use_kl_loss True with kl_loss_coef 0.01 and kl_loss_type low_var_kl (k3), clip_ratio_high 0.285 (low: verl's
default 0.2), loss_agg_mode verl's default token-mean, entropy_coeff 0, self_play.proposer: n 1, reward_type 1-acc,
format_penalty 0, adv_estimator grpo (a group of one: verl's mean 0, std 1, so A = R: allow_singletons "keep" here),
reward_dynamic_sampling off. The proposer's group size is the run's group_size (the script's proposer.n = 1 is
--set group_size=1); the solver's is the transform's n.
"""
from workbench.recipes.base import Recipe, define, use
from workbench.rewards.ssp import SSP_TITLE

define(Recipe(
    key="ssp", title=SSP_TITLE,
    summary="Search self-play on --task search-propose: the policy's proposals that pass the RAG check are solved "
            "5 times by the same policy; proposers get 1 - p (p the solver's success rate), invalid ones 0; GRPO per "
            "proposer group and per question, PPO clip 0.2 / 0.285, token mean, k3 KL 0.01 in the loss.",
    advantage=[use("grpo", allow_singletons="keep")], objective=use("ppo-clip", eps_low=0.2, eps_high=0.285),
    agg="token-mean", regularizers=[use("kl-penalty", beta=0.01, estimator="k3")],
    group_transforms=[use("ssp", n=5)]))
