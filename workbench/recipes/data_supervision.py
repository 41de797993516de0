"""F5 recipes, data as supervision: expert traces trained where the policy's own group fails (AHPO) and samples
weighted by how long their actions take (RL4MLE's duration weighting)."""
from workbench.recipes.base import Recipe, define, use
from workbench.recipes.canonical import GRPO_KL
from workbench.regularizers.ahpo import AHPO_TITLE
from workbench.tasks.guidance import TOY_SOLUTION
from workbench.weights.rl4mle_duration import RL4MLE_TITLE

define(Recipe(
    key="ahpo", title=AHPO_TITLE,
    summary="GRPO plus an SFT term on the prompt's expert trace, switched on for a group with fewer than R_hat = 1 "
            "successes: the trace is appended to the group outside the policy loss and the baseline (the on-policy "
            "group z-score), and trained by its token-mean NLL with weight 1; per-sequence token mean, k3 KL 0.04."
            + TOY_SOLUTION,
    # no reference implementation (MM-HELIX, arXiv 2510.08540): R_hat = 1, SFT token mean, weight 1.0 from the catalog's
    # reading; the GRPO half is the grpo recipe's (workbench/recipes/canonical.py), its advantage computed over the
    # on-policy rows only (advantage:ampo's grpo_split with its defaults: GRPO's z-score, the expert row outside it)
    group_transforms=[use("ahpo", r_hat=1)], advantage=[use("ampo", allow_singletons=False)],
    agg="seq-mean-token-mean", regularizers=[GRPO_KL, use("ahpo", coef=1.0)]))

define(Recipe(
    key="rl4mle-duration", title=RL4MLE_TITLE,
    summary="GRPO whose per-sample loss is weighted by the episode's duration over the minibatch's mean duration "
            "(w_i = dt_i / mean dt), so fast actions that return more often do not dominate the update. At our "
            "scale dt is the episode's number of environment steps (tool calls + answer), not wall-clock time; "
            "per-sequence token mean, k3 KL 0.04. Needs a multi-turn task.",
    # no reference implementation (arXiv 2509.01684; sherryy/rl4mle is not available): the weight w_i = dt_i / mean(dt)
    # is the catalog's reading, on the grpo recipe (workbench/recipes/canonical.py)
    advantage=["grpo"], agg="seq-mean-token-mean", regularizers=[GRPO_KL], loss_weights=["rl4mle-duration"]))
