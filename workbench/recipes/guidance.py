"""F5 recipes, guidance from privileged information: hints and prefixes from the task's solution, teachers,
critiques and retries (`workbench/tasks/guidance.py` renders the hints)."""
from workbench.recipes.base import Recipe, define, use
from workbench.transforms.ghpo import GHPO_TITLE
from workbench.transforms.scaf_grpo import SCAF_TITLE

define(Recipe(
    key="ghpo", title=GHPO_TITLE,
    summary="GRPO whose all-wrong groups are re-sampled with 25 / 50 / 75 % of the solution as a hint in the "
            "prompt (escalated while still all wrong), the hinted samples replacing the group; no KL.",
    # hkgc-1/GHPO recipes/Qwen2.5-Math-7B/ghpo/config_ghpo.yaml: beta 0, scale_rewards true, start_hint_step 0
    # (TRL's GRPOTrainer of the time: per-sequence token mean)
    advantage=["grpo"], agg="seq-mean-token-mean", group_transforms=[use("ghpo")]))

define(Recipe(
    key="scaf-grpo", title=SCAF_TITLE,
    summary="GRPO where, after 50 warm-up steps, a group whose samples all score 0 is sampled once per tiered hint "
            "level (the solution in four growing parts); the least hint that succeeds replaces the group's first "
            "row, hinted prompt included; token-mean loss, no KL.",
    # dvlab-research/Scaf-GRPO sh/hint_mix_grpo/bs256_6k_mix.sh: adv_estimator=grpo (std-normalized), no KL loss,
    # with_hint, replace_hint_prompt=False, replace_num=1, warmup_steps=50; verl's loss_agg_mode token-mean
    advantage=["grpo"], agg="token-mean", group_transforms=[use("scaf-grpo")]))
