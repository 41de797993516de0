"""CAPO's recipe: GRPO without std scaling or KL, trained only on the tokens CAPO predicts are safe to step on.

As the reference's `..._capo_only.yaml`: `normalize_advantages: false` (group mean only), `beta: 0.0` (no KL), its
trainer's loss (PPO clip 0.2, per-sequence token mean over the kept tokens, then the mean over sequences).

Thresholds: the predicted KL grows as lr^2 and the shift as lr, so the catalog's tau_F = 1e-4, tau_H = 0.01 (the
reference's lr 1.5e-5 on a 7B head) are too tight for the workbench's test learning rate 1e-3 on the tiny model:
there every token with A != 0 is rejected on Adam's first (sign-like) update, the gradient is 0, the moments stay 0,
and the next prediction rejects them again (the reference starts from a warm-up lr of 0). tau_F = 5e-3 and
tau_H = 0.05 reject about half the tokens on the first update and a few percent afterwards at lr 1e-3, the paper's
regime; at the smoke preset's lr 1e-4 the catalog's values do the same
(`--set recipe_overrides.objective.tau_fisher=1e-4 --set recipe_overrides.objective.tau_hessian=0.01`).
"""
from workbench.objectives.capo import CAPO_TITLE
from workbench.recipes.base import Recipe, define, use

define(Recipe(
    key="capo", title=CAPO_TITLE,
    summary="Group-mean advantage (no std scaling, no KL), PPO clip on the tokens whose predicted KL and surrogate "
            "shift under the optimizer's next Adam step on the LM head stay small; sequence-mean token-mean loss.",
    advantage=[use("grpo", scale="none")], objective=use("capo", tau_fisher=5e-3, tau_hessian=0.05),
    agg="seq-mean-token-mean"))
