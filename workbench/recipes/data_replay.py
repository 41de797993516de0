"""F5 recipes, data that teaches (part 2): replay of past rows and curricula over a fixed pool of prompts.

Replay by prompt and per-prompt statistics need prompts that recur: these recipes sample a fixed pool
(`samplers.pool`, 64 prompts, an epoch at a time; `--set recipe_overrides.sampler.size=N` changes it)."""
from workbench.recipes.base import Recipe, define, use
from workbench.recipes.canonical import GRPO
from workbench.transforms.arpo_gui import ARPO_GUI_TITLE

# dvlab-research/ARPO, examples/osworld_subset32.sh with its verl config: GRPO (std-normalized), clip 0.2 / 0.3, no KL
# (use_kl_loss False, kl_coef 0), no entropy bonus, token-mean, n = 8, lr 1e-6 (the preset's lr here). Replay:
# per-task buffer of 8 successes (eval result > 0.1), injected when std < 0.05 and mean < 0.2.
define(Recipe(
    key="arpo-gui", title=ARPO_GUI_TITLE,
    summary="GRPO on a fixed pool of prompts whose all-fail groups get a stored success of the same prompt in place "
            "of their first row (per-prompt FIFO of 8 successes); clip 0.2 / 0.3, no KL, token mean.",
    sampler=use("pool", size=64), group_transforms=[use("arpo-gui", per_task=8)],
    advantage=["grpo"], objective=use("ppo-clip", eps_low=0.2, eps_high=0.3), agg="token-mean"))

# The ablation that isolates the replay: arpo-gui's sampler (the pool), loss and settings without its transform. GRPO
# draws fresh prompts with clip 0.2 and a k3 KL term, so arpo-gui against grpo also compares the pool and the loss.
define(Recipe(
    key="arpo-gui-no-replay", title=ARPO_GUI_TITLE,
    summary="ARPO-GUI's ablation: its pool of 64 prompts, clip 0.2 / 0.3, no KL and token mean, without the replay "
            "of stored successes (the baseline its replay is measured against).",
    sampler=use("pool", size=64), advantage=["grpo"], objective=use("ppo-clip", eps_low=0.2, eps_high=0.3),
    agg="token-mean"))

# The control of every pool-based recipe: GRPO exactly (z-score, clip 0.2, k3 KL 0.04, per-sequence token mean) on the
# same pool of 64 prompts. The papers compare against GRPO on their dataset; here `grpo` draws fresh prompts each
# step, so a pool recipe against grpo also measures the pool. Against grpo-pool only the method differs.
define(Recipe(
    key="grpo-pool", title="DeepSeekMath: Pushing the Limits of Mathematical Reasoning in Open Language Models",
    summary="GRPO on a fixed pool of 64 prompts (an epoch at a time): the control the pool-based data recipes "
            "(DOTS, PCL, TraPO, RAPO, ExIt, A3T, DART, ARPO-GUI) are read against.",
    sampler=use("pool", size=64), **GRPO))
