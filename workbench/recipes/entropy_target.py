"""F3 recipes, entropy targeting through the temperature: DCPO and AEPO-arbitrary.

Both follow the references' EasyR1 set-up (597358816/DCPO, 597358816/AEPO `examples/qwen-math-7b-*.sh`): GRPO
advantages, PPO clip 0.2 / 0.2 with dual clip 3, token-mean loss, no KL (`algorithm.disable_kl=true`), and the same
switch T = 1.2 at or below H_target = 0.5, 0.8 above (`controller:dcpo` / `controller:aepo-arbitrary`).
"""
from workbench.advantages.aepo import AEPO_TITLE
from workbench.advantages.dcpo import DCPO_TITLE
from workbench.recipes.base import Recipe, define, use

SWITCH = dict(entropy_base=0.5, t_high=1.2, t_low=0.8)  # TrainerConfig defaults; the scripts set entropy_base=0.5
EASYR1_CLIP = use("ppo-clip", eps_low=0.2, eps_high=0.2, dual_clip_c=3.0)  # ActorConfig clip_ratio_low/high/dual

define(Recipe(
    key="dcpo", title=DCPO_TITLE,
    summary="GRPO advantage mixed with alpha [correct] pi_old^(T)/pi_old: T = 1.2 while the last entropy is at or "
            "below H_0 = 0.5, else 0.8; alpha grows with |H_0 - H| (capped at 0.1) over the share correct.",
    advantage=["grpo", "dcpo"], objective=EASYR1_CLIP, agg="token-mean", reward_shaping=["dcpo"],
    # one switch, two driven components: the scoring step takes T, the advantage H_0 - H
    controllers=[use("dcpo", into="reward_shaping:dcpo", **SWITCH), use("dcpo", into="advantage:dcpo", **SWITCH)]))

define(Recipe(
    key="aepo-arbitrary", title=AEPO_TITLE,
    summary="GRPO plus positive-only REINFORCE on correct samples re-drawn at T (1.2 at or below the entropy "
            "target 0.5, else 0.8) from a quarter of the prompts; they replace the batch's first 3/128 rows "
            "(half above the target) with advantage 1.",
    advantage=[use("grpo", allow_singletons=True), "aepo-arbitrary"], objective=EASYR1_CLIP, agg="token-mean",
    group_transforms=["aepo-arbitrary"],
    controllers=[use("aepo-arbitrary", into="group_transform:aepo-arbitrary", **SWITCH)]))
