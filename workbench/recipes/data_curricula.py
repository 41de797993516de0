"""F5 recipes, data curricula over a fixed pool of prompts: which prompts a step trains on, chosen by a prediction of
their pass rate (PCL) or, for prompts without labels, by how their pass-rate trajectory resembles labeled ones'
(TraPO). Both sample a pool of 64 prompts (`--set recipe_overrides.sampler.size=N` changes it)."""
from workbench.recipes.base import Recipe, define, use
from workbench.recipes.canonical import GRPO
from workbench.samplers.pcl import PCL_TITLE
from workbench.samplers.trapo import TRAPO_TITLE

# No code located for PCL; the paper trains GRPO-style on binary verifier rewards and keeps the prompts whose predicted
# pass rate is closest to tau = 0.5 among k m candidates (k = 4: the catalog's default, not given in the paper). The
# policy loss is left as GRPO's (clip 0.2, k3 KL 0.04, per-sequence token mean) so that the comparison with grpo
# isolates the choice of prompts (and the pool).
define(Recipe(
    key="pcl", title=PCL_TITLE,
    summary="GRPO on prompts chosen by a value model of their pass rate: each step 4 m candidates from a pool of 64, "
            "the m whose predicted pass rate is closest to 0.5 kept; the value model (an MLP on prompt features) is "
            "fit by MSE to each step's empirical pass rates.",
    sampler=use("pcl", size=64, k=4, tau=0.5), **GRPO))

# ShenzhiYang2000/TRAPO @ 2cc9ef8, Weakly_Supervised/scripts/run/run_semi.sh: adv_estimator grpo, rollout.n = 8,
# use_kl_loss True, kl_loss_coef 0.001, kl_loss_type low_var_kl (k3 clamped to [-10, 10]), entropy_coeff 0,
# use_kl_in_reward False, verl's default clip 0.2 and token-mean, lr 1e-6 (the preset's lr here); data
# id_l_1k_u_1k (labeled share 0.5); +trainer.warm_up=8, update_db=True, topk=0.1, thres=0.4. The transform must come
# first: it rewrites the unlabeled rows' rewards before any other component reads them.
define(Recipe(
    key="trapo", title=TRAPO_TITLE,
    summary="Semi-supervised GRPO on a pool of 64 prompts, half labeled: unlabeled prompts are rewarded by their "
            "group's majority answer and, after 8 warm-up epochs, train only when their pass-rate trajectory "
            "matches the labeled ones' (top 10 % or mean cosine >= 0.4); k3 KL 0.001, token mean.",
    sampler=use("trapo", size=64, labeled=0.5, warm_up=8, topk=0.1, thres=0.4, update_db=True),
    group_transforms=[use("trapo")], advantage=["grpo"], agg="token-mean",
    regularizers=[use("kl-penalty", beta=0.001, estimator="k3", value_clamp=10.0)]))
