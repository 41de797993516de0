"""Recipes that route each sample to the update that suits it: SRPO (GRPO for correct samples, self-distillation
from a teacher prompted with a correct sibling for failed ones).

SRPO's paper is read from its abstract (no official code located); the settings of the GRPO half are those of the
SDPO trainer it unifies with, TRL's `SDPOConfig` at huggingface/trl @ f2cd57710ae345ea6428ae95363267fcf38a3dc8
(`trl/experimental/sdpo/sdpo_config.py`): group-scaled advantages (`scale_rewards="group"`), clip 0.2 both sides
(`epsilon=0.2`, `epsilon_high=None`), no KL term (`beta=0.0`), one token mean over the batch (`loss_type="dapo"`),
which is also the card's "token-mean over the union of GRPO and SDPO tokens". The distillation half is the card's
decision: forward KL over the whole vocabulary, weights exp(-beta H_teacher) normalized to mean 1, beta = 1.
"""
from workbench.objectives.srpo_route import SRPO_TITLE
from workbench.recipes.base import Recipe, define, use
from workbench.transforms.srpo_teacher import TEACHER_TEMPLATE

define(Recipe(
    key="srpo-route", title=SRPO_TITLE,
    summary="Correct samples: GRPO (group z-score advantage, PPO clip 0.2); failed samples whose group has a correct "
            "one: forward KL to the policy before the update prompted with that sibling, over the whole vocabulary, "
            "weighted exp(-H_teacher) / mean; failed samples without: GRPO. One token mean, no KL term.",
    # the teacher: TRL's SDPO reprompt with the first correct sibling, the whole vocabulary (topk=0: exact; set topk
    # for a large vocabulary, see workbench/objectives/srpo_route.py), correct = the verifier's score >= 1
    group_transforms=[use("srpo-route", template=TEACHER_TEMPLATE, topk=0, threshold=1.0)],
    advantage=["grpo"],
    objective=use("srpo-route", beta=1.0, eps_low=0.2, eps_high=0.2),
    agg="token-mean"))
