"""F8 recipe, LSPO: latent space policy optimization on werewolf (`--task werewolf`).

An iteration of `every` = 20 steps: the self-play statements of its first step are clustered into latent intents
(k = 2 at the first iteration, one more each iteration up to k_max = 6), the latent game is solved by CFR+ (200
iterations, from the played moves' behaviour policy), and every step of the iteration trains DPO (beta 0.1) on
pairs of statements sampled at one context of its own games, the intent sigma* plays more likely chosen
(`workbench/rollout/latent_pairs.py`). The DPO reference becomes the policy at the end of each iteration (`iterate`,
the same 20 steps), as LSPO fine-tunes each iteration from the last. The games per step are the run's
prompts_per_step x group_size (one deal per example); each context gets the played statement and 3 more samples.

No reference implementation was located (the card's confidence: abstract-only); beta, k, k_max, the iteration
length and the candidate count are ours, small enough for a CPU step of seconds with the tiny model.
"""
from workbench.preference.lspo import LSPO_TITLE
from workbench.recipes.base import Recipe, define, use
from workbench.recipes.preference import loss

LSPO_EVERY = 20  # steps per LSPO iteration: the latent space and policy, and the DPO reference, move together

define(Recipe(
    key="lspo", title=LSPO_TITLE,
    summary="Werewolf self-play; statements clustered into k latent intents (2, one more per 20-step iteration, up "
            "to 6), the latent game solved by CFR+ from the played moves, DPO (beta 0.1) on pairs of statements "
            "sampled at one context: the intent the latent policy plays more likely chosen; the reference moves to "
            "the policy every iteration.",
    objective=loss("lspo", beta=0.1),
    rollout=use("lspo", candidates=3, k=2, k_max=6, every=LSPO_EVERY, cfr_iterations=200, min_gap=0.0),
    reference=use("iterate", every=LSPO_EVERY)))
