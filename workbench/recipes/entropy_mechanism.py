"""F3 recipes of "The Entropy Mechanism of Reinforcement Learning for Reasoning Language Models": Clip-Cov and
KL-Cov on GRPO advantages, with the settings of the paper's scripts (PRIME-RL/Entropy-Mechanism-of-RL, verl
`recipe/entropy/7b_clip_cov.sh`, `7b_kl_cov.sh`): token-mean loss, no KL term."""
from workbench.recipes.base import Recipe, define, use

ENTROPY_TITLE = "The Entropy Mechanism of Reinforcement Learning for Reasoning Language Models"

define(Recipe(
    key="clip_cov", title=ENTROPY_TITLE,
    summary="GRPO whose PPO loss is detached on a random few tokens with high logp-advantage covariance "
            "(ratio 2e-4 of the tokens, at least one per step, covariance in (1, 5)); no KL.",
    advantage=["grpo"], objective=use("clip_cov", clip_cov_ratio=2e-4, clip_cov_lb=1.0, clip_cov_ub=5.0),
    agg="token-mean"))

define(Recipe(
    key="kl_cov", title=ENTROPY_TITLE,
    summary="GRPO with the unclipped surrogate and a |logp - old| penalty (coef 1) on the top 0.2% of tokens by "
            "logp-advantage covariance (at least one per step); no KL.",
    advantage=["grpo"], objective=use("kl_cov", kl_cov_ratio=2e-3, ppo_kl_coef=1.0), agg="token-mean"))
