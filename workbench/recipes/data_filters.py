"""F5 recipes, data filters: which of the sampled rows, or which of their tactics, the update trains on."""
from workbench.recipes.base import Recipe, define, use
from workbench.recipes.canonical import CRITIC, GAE, KL_IN_REWARD
from workbench.transforms.bfs_prover import BFS_TITLE
from workbench.transforms.grpo_roc import ROC_TITLE
from workbench.transforms.pf_ppo import PF_PPO_TITLE

# microsoft/rStar @ ecbfb94, examples/run_qwen3-14b_rstar2_agent_weave.sh: GRPO, rollout.n = 32 down-sampled to
# down_sample_to_n = 16 (here: group_size G is the kept 16, oversample = 32 / 16 = 2), reject_equal_reward, both
# penalties on, min_zero_reward_trace_num = min_non_zero_reward_trace_num = 2; use_kl_loss False, kl_loss_coef 0,
# use_kl_in_reward False, entropy_coeff 0, clip_ratio_low 0.2 / clip_ratio_high 0.28, verl's token-mean; lr 1e-6.
define(Recipe(
    key="grpo-roc", title=ROC_TITLE,
    summary="GRPO on Resample-on-Correct batches: 2G rollouts per prompt, groups of equal rewards dropped, G kept "
            "with the positive/negative ratio preserved (at least 2 of each), the correct traces of fewest tool "
            "errors and answer-format faults first. Clip 0.2 / 0.28, token mean, no KL, no entropy bonus; the script "
            "keeps 16 of 32 (--set group_size=16) at lr 1e-6.",
    advantage=["grpo"], objective=use("ppo-clip", eps_low=0.2, eps_high=0.28), agg="token-mean",
    group_transforms=[use("grpo-roc", oversample=2, min_negative=2, min_positive=2)]))

# verl @ b178a3c, verl/trainer/config/ppo_trainer.yaml (algorithm.pf_ppo: reweight_method "pow", weight_pow 2.0),
# applied in ray_trainer.compute_advantage to the GAE branch only: PPO with a critic, as the canonical ppo recipe
# (GAE gamma 1 / lambda 0.95, k1 KL in the reward, value loss).
define(Recipe(
    key="pf-ppo", title=PF_PPO_TITLE,
    summary="PPO (critic + GAE, k1 KL in the reward) on a batch redrawn with replacement, same size, with weights "
            "|R|^2 (verl's default; reweight_method max_min ~ Best-Worst, max_random ~ Best-Random), so the update "
            "favours samples whose reward is reliable.",
    advantage=[GAE], agg="token-mean", reward_shaping=[KL_IN_REWARD], value=CRITIC,
    group_transforms=[use("pf-ppo", reweight_method="pow", weight_pow=2.0)]))

# No training code located (zeyu-zheng/BFS-Prover-V2 ships search inference only): the catalog's band q = 0.1 / 0.9.
# Expert iteration (SFT on the tactics of found proofs, reward +1) read as GRPO on the kept tactics, no KL; groups
# the filter leaves with one row get A = 0.
define(Recipe(
    key="bfs-prover-v2", title=BFS_TITLE,
    summary="GRPO on the tactics inside the perplexity band: each step's log-perplexity under the sampling policy, "
            "tactics below the 10 % or above the 90 % quantile of the batch (trivial or noisy) are not trained on; "
            "token mean, no KL. The paper's retraining from the base checkpoint on a plateau is not run.",
    advantage=[use("grpo", allow_singletons=True)], agg="token-mean",
    group_transforms=[use("bfs-prover-v2", q_lo=0.1, q_hi=0.9)]))
