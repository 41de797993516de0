"""F6 recipes for the reward-design comparisons (notebook 12): DAPO's overlong punishment alone on GRPO, and
the reward-hacking pairs (a reward that can be gamed, and the paper's fix)."""
from workbench.recipes.base import Recipe, define, use
from workbench.recipes.canonical import GRPO


define(Recipe(
    key="soft-overlong", title="DAPO: An Open-Source LLM Reinforcement Learning System at Scale",
    summary="GRPO plus DAPO's soft overlong punishment alone, its buffer the paper's share of the budget "
            "(C/L = 4096/20480 = 0.2: the last 2 of countdown's 10 tokens; set buffer with the budget).",
    rewards=[use("soft-overlong", buffer=2)], **GRPO))

LENGTH_BIASED = [use("length-bias", weight=1.0)]
define(Recipe(
    key="length-bias", title="A hackable proxy: a reward model's length bias (teaching example)",
    summary="GRPO on the verifier's score plus a reward model's length bias |y|/L: a long wrong answer earns "
            "almost what a short right one does, so padding pays.",
    rewards=LENGTH_BIASED, **GRPO))

define(Recipe(
    key="length-bias-cgpo", title="The Perfect Blend: Redefining RLHF with Mixture of Judges",
    summary="The length-biased reward under CGPO's judges (format: cut at the budget; length: over 9 of its 10 "
            "tokens, above every countdown answer): a flagged sample gets -1, the others sigma(r - group mean).",
    rewards=LENGTH_BIASED, reward_shaping=[use("cgpo", judges=("format", "length"), max_length_fraction=0.9)], **GRPO))

define(Recipe(
    key="length-bias-cgpo-tight", title="The Perfect Blend: Redefining RLHF with Mixture of Judges",
    summary="length-bias-cgpo with a tighter length judge (over 3/4 of the budget, 7.5 of 10 tokens): it also flags "
            "the longest right countdown answers (8 tokens, about 30% of targets).",
    rewards=LENGTH_BIASED, reward_shaping=[use("cgpo", judges=("format", "length"), max_length_fraction=0.75)], **GRPO))
