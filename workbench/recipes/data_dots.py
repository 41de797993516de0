"""F5 recipes: DOTS, difficulty-targeted online selection over a pool, with rollout replay (DOTS+RR) and its ablations.

Settings from ASTRAL-Group/data-efficient-llm-rl @ 59df918, `rl_training/run_bash/final_ds_teacher_replay.sh`:
algorithm.adv_estimator=grpo, MU=2, TAU=1e-3, ALPHA=0.5, SIGMA=0.5, BUFFER_SIZE=512, REPLAY_STRATEGY=random,
use_temp_log_prob=True (the replay-aware clip, `dots-rr-clip`), kl_loss_coef BETA=0 and ENTROPY_COEFF=0 (no KL, no
entropy term), verl's clip_ratio 0.2 and token-mean loss, n = 8 (the run's group_size), lr 1e-6 (the preset's lr
here). The paper's dataset of ~40k prompts is our fixed pool of 64 (`recipe_overrides.sampler.size`); its reference
set of 256 measured prompts is the pool's prompts measured in training (see `samplers.dots`).

The comparisons: `dots-rr` against `grpo` (accuracy per rollout spent: the claim), `dots-rr` against `dots-rr-ppo`
(the same replay trained with plain PPO-clip: does the behaviour weight pi_old/mu make replay safe?) and `dots`
against `dots-rr` (what the replay adds to the selection).
"""
from workbench.recipes.base import Recipe, define, use
from workbench.samplers.dots import DOTS_TITLE

DOTS_SAMPLER = dict(size=64, alpha=0.5, tau=1e-3, mu=2)

define(Recipe(
    key="dots-rr", title=DOTS_TITLE,
    summary="DOTS + rollout replay on a pool of 64 prompts: every 2 steps, prompts drawn near 50 % predicted "
            "difficulty (softmax(-|d - 0.5|/1e-3), unmeasured prompts by attention over measured ones); half a step "
            "fresh, half whole groups replayed from a FIFO of 512 groups; GRPO advantages, PPO clip 0.2 around pi_old "
            "times the behaviour weight pi_old/mu, token mean, no KL.",
    sampler=use("dots-rr", fresh=0.5, **DOTS_SAMPLER), group_transforms=[use("dots-rr", groups=512)],
    advantage=["grpo"], objective=use("dots-rr-clip", eps_low=0.2, eps_high=0.2), agg="token-mean"))

# The loss ablation: the same selection and replay, replayed rows clipped and ratio'd against pi_old only (no
# pi_old/mu weight): what `dots-rr-clip`'s claim ("importance-corrected to the behaviour policy, replay is safe") is
# measured against.
define(Recipe(
    key="dots-rr-ppo", title=DOTS_TITLE,
    summary="DOTS+RR's ablation: its selection and replay (half of each step replayed), trained with plain PPO-clip "
            "(0.2) on pi/pi_old, without the behaviour weight pi_old/mu on replayed rows.",
    sampler=use("dots-rr", fresh=0.5, **DOTS_SAMPLER), group_transforms=[use("dots-rr", groups=512)],
    advantage=["grpo"], objective=use("ppo-clip", eps_low=0.2, eps_high=0.2), agg="token-mean"))

# DOTS alone (fresh = 1: every prompt of a step selected, nothing replayed), the paper's "DOTS" row; on fresh rows
# dots-rr-clip is ppo-clip (mu = pi_old), so the loss is PPO's.
define(Recipe(
    key="dots", title=DOTS_TITLE,
    summary="DOTS without replay: every 2 steps, prompts of a pool of 64 drawn near 50 % predicted difficulty "
            "(softmax(-|d - 0.5|/1e-3)); all fresh; GRPO advantages, PPO clip 0.2, token mean, no KL.",
    sampler=use("dots-rr", fresh=1.0, **DOTS_SAMPLER),
    advantage=["grpo"], objective=use("ppo-clip", eps_low=0.2, eps_high=0.2), agg="token-mean"))
