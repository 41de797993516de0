"""F5 recipes, data that teaches (self-imitation): the policy's own past successes, kept and trained on again.

`rapo` samples a fixed pool (its sampler prunes prompts the whole group solved), so a prompt's latest success can be
put back into a later failed group; `spear` keeps the batch's above-average rows for a few steps and replays them
with a recalibrated advantage and a rising loss weight, on fresh prompts."""
from workbench.recipes.base import Recipe, define, use
from workbench.recipes.canonical import GRPO
from workbench.advantages.rapo import RAPO_TITLE
from workbench.rewards.tools import SPEAR_TITLE

# No training code (FractalAIResearchLabs/Fathom-DeepResearch @ cdc2010b ships inference and serving only): GRPO's
# settings (the grpo recipe: group z-score, per-sequence token mean, k3 KL 0.04) with RAPO's three parts, our
# decisions: (i) prune a prompt after a group with pass rate 1, never below a step's 16 prompts, on a pool of 64
# (arpo-gui's); (ii) A <- A N / #(rows with A != 0) over the batch; (iii) the latest success (reward > 0.5) of the
# prompt into each group that failed throughout. The step reward on tool calls (reward:rapo) is left out: countdown
# has no tool calls, it would add exact zeros (add rewards=[use("rapo")] on a tool task).
define(Recipe(
    key="rapo", title=RAPO_TITLE,
    summary="GRPO on a fixed pool of 64 prompts with RAPO's three parts: a prompt the whole group solved is never "
            "sampled again, each all-fail group gets the prompt's latest stored success in place of its first row, "
            "and advantages are scaled by N / #(rows with A != 0) so sparse rewards keep the update's size.",
    sampler=use("rapo", size=64), group_transforms=[use("rapo")],
    **{**GRPO, "advantage": ["grpo", use("rapo", scope="batch")]}))

# TencentYoutuResearch/SPEAR @ 7e84315, verl-agent/examples/gigpo_trainer/run_alfworld_spear.sh (Dr.BoT + SIL):
# use_kl_loss False / kl_coef 0, clip_ratio_low 0.2 / clip_ratio_high 0.28, norm_adv_by_std_in_grpo False,
# loss_agg_mode seq-mean-token-sum-norm, enable_trajectory_replay True, tolerate_steps 5, replay_loss_coef 1,
# max_replay_loss_ascending_steps 100, weight_decay_trajectory_replay -1 (p50 recalibration), baseline_buffer_size
# 10240. Our scale: TRAIN_BUFFERSIZE 2048 -> capacity 64 (the reference's batch of thousands of step-rows fills
# 1.5 x 2048 in a few steps; 16 x 8 = 128 rows a step with some 20-30 above their group mean fill 1.5 x 64 in about
# four), T_SIL = half the run (100 of the script's 200-step runs; 50 of our 100). Left out: clip_cov (the script's
# loss_mode; optional), the response filters (overlong / incomplete / repetitive / unreadable: countdown answers are
# 10 tokens) and the rollout_filter_ratio std filter; the intrinsic tool reward is `spear-tool-reward`'s recipe
# (countdown has no tool calls).
define(Recipe(
    key="spear", title=SPEAR_TITLE,
    summary="Dr.BoT (no KL, clip 0.2 / 0.28, no std normalization, seq-mean-token-sum-norm) plus SPEAR's "
            "self-imitation: rows above their group mean are kept 5 steps and, once more than 1.5 x 64 beat the "
            "median group mean b, replayed with A = R - b > 0 under a loss weight rising along a half cosine to 1 "
            "over the first half of the run.",
    group_transforms=[use("spear", capacity=64, tolerate_steps=5, baseline_buffer_size=10240)],
    advantage=[use("spear", norm_by_std=False)], objective=use("ppo-clip", eps_low=0.2, eps_high=0.28),
    agg="seq-mean-token-sum-norm", loss_weights=[use("spear")],
    schedules=[use("spear", into="loss_weight:spear.coef", coef=1.0, max_replay_loss_frac=0.5)]))
