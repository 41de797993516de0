"""F5 recipes, self-training on the policy's own data: start states bootstrapped from its attempts (ExIt), successes
accumulated over rounds (A^3T).

Both sample a fixed pool of prompts (`samplers.pool`, 64 prompts; `--set recipe_overrides.sampler.size=N`): ExIt's
histories revise pooled prompts, and A^3T's rounds revisit one training set."""
from workbench.advantages.a3t import A3T_TITLE
from workbench.recipes.base import Recipe, define, use
from workbench.recipes.canonical import GRPO
from workbench.rewards.exit import EXIT_TITLE

# No reference implementation located (REFERENCES-AGENTS.md section 5). The paper trains GRPO on the start states; the
# card's decide for what it does not give: learnability p(1 - p), PLR rank sampling at temperature 0.3, buffer
# probability 0.5, diversity bonus R (1 + 0.2 d / mean d) on rewarded answers. The rest is the project's grpo recipe
# (recipes/canonical.py: z-score, clip 0.2, seq-mean-token-mean, k3 KL 0.04).
define(Recipe(
    key="exit", title=EXIT_TITLE,
    summary="GRPO on a pool of 64 prompts whose start states are, half the time, a previous attempt of a pooled "
            "prompt put before it ('Previous attempt: ...'): one improvement step, scored by the prompt's verifier. "
            "Attempts come from finished groups ranked by learnability p(1 - p) (PLR rank sampling, temperature "
            "0.3); rewarded answers far from their group's centroid earn up to x(1 + 0.2 d / mean d).",
    sampler=use("exit", size=64, buffer_prob=0.5, temperature=0.3, capacity=256),
    reward_shaping=[use("exit", kappa=0.2)], **GRPO))

# No reference implementation located (REFERENCES-AGENTS.md). The card's reading: policy gradient with binarized
# rewards, L = -sum R~ sum_t m log pi, token mean, over accumulated successes and the latest round's failures:
# REINFORCE (`gpg`, no clip, no KL term: the card names none) with the +-1 advantage. The ActRe rationale synthesis
# needs a ReAct agent: not at this scale (transforms/a3t.py). Success-only ablation (SFT on successes):
# --set recipe_overrides.advantage:a3t.success_only=true plus the token mask min-abs-advantage (threshold 0.5).
define(Recipe(
    key="a3t", title=A3T_TITLE,
    summary="Contrastive self-training on a pool of 64 prompts: every success is stored (up to 4096, oldest leave "
            "first) and 16 stored successes of earlier rounds join each step's batch; REINFORCE with the binarized "
            "reward as advantage (+1 success, -1 failure, no baseline), token mean, no KL: NLL(successes) - "
            "NLL(failures).",
    sampler=use("pool", size=64), group_transforms=[use("a3t", capacity=4096, replay=16)],
    advantage=[use("a3t")], objective="gpg", agg="token-mean"))
