"""F5 recipes, guidance from privileged information: hints and prefixes from the task's solution, teachers,
critiques and retries (`workbench/tasks/guidance.py` renders the hints)."""
from workbench.recipes.base import Recipe, define, use
from workbench.rollout.icpo import ICPO_TITLE
from workbench.rollout.prefixrl import PREFIXRL_TITLE
from workbench.transforms.ghpo import GHPO_TITLE
from workbench.transforms.pope import POPE_TITLE
from workbench.transforms.scaf_grpo import SCAF_TITLE
from workbench.tasks.guidance import TOY_SOLUTION

define(Recipe(
    key="ghpo", title=GHPO_TITLE,
    summary="GRPO whose all-wrong groups are re-sampled with 25 / 50 / 75 % of the solution as a hint in the "
            "prompt (escalated while still all wrong), the hinted samples replacing the group; no KL." + TOY_SOLUTION,
    # hkgc-1/GHPO recipes/Qwen2.5-Math-7B/ghpo/config_ghpo.yaml: beta 0, scale_rewards true, start_hint_step 0
    # (TRL's GRPOTrainer of the time: per-sequence token mean)
    advantage=["grpo"], agg="seq-mean-token-mean", group_transforms=[use("ghpo")]))

define(Recipe(
    key="scaf-grpo", title=SCAF_TITLE,
    summary="GRPO where, after 50 warm-up steps, a group whose samples all score 0 is sampled once per tiered hint "
            "level (the solution in four growing parts); the least hint that succeeds replaces the group's first "
            "row, hinted prompt included; token-mean loss, no KL." + TOY_SOLUTION,
    # dvlab-research/Scaf-GRPO sh/hint_mix_grpo/bs256_6k_mix.sh: adv_estimator=grpo (std-normalized), no KL loss,
    # with_hint, replace_hint_prompt=False, replace_num=1, warmup_steps=50; verl's loss_agg_mode token-mean
    advantage=["grpo"], agg="token-mean", group_transforms=[use("scaf-grpo")]))

define(Recipe(
    key="icpo", title=ICPO_TITLE,
    summary="One of the G samples per prompt is drawn with a solved demonstration in the prompt and trained under "
            "the plain prompt through -A p/(p + 0.1); the others by dual-clip PPO (0.2 / 0.2, c = 3); correct "
            "steered samples earn an expert bonus 1 + max(0, 1 - t/400); token mean, k3 KL 0.001." + TOY_SOLUTION,
    # Celine-hxy/ICPO scripts/baseline/Qwen3-1.7b/ICPO_qwen3-1.7b_math-demo-icpo-rs.sh: adv_estimator=grpo,
    # policy_loss.loss_mode=icpo (clip 0.2 / 0.2, verl's clip_ratio_c 3.0), kl_loss_coef 0.001 low_var_kl,
    # entropy_coeff 0, n 8, off_policy_rollout.rollout_num 1, demo_cache.n_demo 1; the "-rs" script's reward
    # shaping (compute_score_icpo_bonus: beta 1, linear decay T = 400)
    rollout="icpo", advantage=["grpo"], objective=use("policy-shaping", dual_clip_c=3.0), agg="token-mean",
    reward_shaping=["icpo"], regularizers=[use("kl-penalty", beta=0.001, estimator="k3", value_clamp=10.0)]))

define(Recipe(
    key="prefixrl", title=PREFIXRL_TITLE,
    summary="GRPO where half the groups continue a prefix of the task's solution (25 / 50 / 75 %, whichever runs "
            "at a 0.2-0.8 pass rate); prefix tokens are context (mask 0), the rest is on-policy RL; no KL."
            + TOY_SOLUTION,
    # no reference implementation; the paper's objective is standard on-policy RL on the prefixed problems: GRPO's
    # advantage and loss, without a KL term (none is described)
    rollout="prefixrl", advantage=["grpo"], agg="seq-mean-token-mean"))

define(Recipe(
    key="pope", title=POPE_TITLE,
    summary="GRPO where each hard problem (no success in G samples) also trains in a guided copy: the shortest "
            "prefix of its oracle solution (25 / 50 / 75 %) in the prompt that yields a success; oracle tokens are "
            "context, never targets; no KL." + TOY_SOLUTION,
    # no released code: the paper trains on-policy (GRPO-style) on a guided / unguided mixture with no SFT or
    # off-policy term; constants from the catalog's reading
    advantage=["grpo"], agg="seq-mean-token-mean", group_transforms=[use("pope")]))
