"""Recipes: named, frozen compositions of catalog components. The RL loop only looks these up.

    grpo = advantage "grpo" + objective "ppo-clip" + agg "seq-mean-token-mean" + KL "k3" in the loss
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from workbench import registry


@dataclass(frozen=True)
class Recipe:
    key: str
    title: str                      # the paper the recipe follows
    summary: str
    advantage: str                  # registered advantage key
    objective: str = "ppo-clip"     # registered objective key
    agg: str = "token-mean"         # loss aggregation mode
    kl_placement: str = "none"      # "loss", "reward" or "none"
    kl_estimator: str = "k3"        # k1 | k2 | k3 | abs (+ straight-through suffix)
    kl_coef: float = 0.0            # beta
    entropy_coef: float = 0.0       # c_H of the entropy bonus
    critic: bool = False            # train a value head with the clipped value loss
    vf_coef: float = 0.1            # weight of the value loss when critic=True
    token_masks: tuple = ()         # registered data keys applied to the mask, e.g. ("overlong-filter",)
    advantage_kw: dict = field(default_factory=dict)
    objective_kw: dict = field(default_factory=dict)

    def components(self) -> list[tuple[str, str]]:
        """(kind, key) of every catalog component the recipe uses."""
        out = [("advantage", self.advantage), ("objective", self.objective), ("aggregation", self.agg)]
        if self.kl_placement != "none":
            out += [("regularizer", "kl-penalty"), ("regularizer", self.kl_estimator.rstrip("+"))]
        if self.entropy_coef:
            out.append(("regularizer", "entropy-bonus"))
        if self.critic:
            out.append(("objective", "value-loss"))
        return out + [("data", key) for key in self.token_masks]

    def as_dict(self) -> dict:
        return asdict(self)


RECIPES: dict[str, Recipe] = {}


def define(recipe: Recipe) -> Recipe:
    RECIPES[recipe.key] = recipe
    registry.register("recipe", recipe.key, title=recipe.title, summary=recipe.summary,
                      defaults=recipe.as_dict(), family="canonical",
                      confidence=registry.catalog().get(recipe.key, {}).get("confidence", "exact"))(recipe)
    return recipe


def get_recipe(key: str) -> Recipe:
    if key not in RECIPES:
        raise KeyError(f"no recipe named {key!r}; recipes: {', '.join(sorted(RECIPES))}")
    return RECIPES[key]


define(Recipe(
    key="grpo", title="DeepSeekMath: Pushing the Limits of Mathematical Reasoning in Open Language Models",
    summary="Group z-score advantage, PPO clip, per-sequence token mean, k3 KL in the loss.",
    advantage="grpo", agg="seq-mean-token-mean", kl_placement="loss", kl_estimator="k3", kl_coef=0.04))

define(Recipe(
    key="dr_grpo", title="Understanding R1-Zero-Like Training: A Critical Perspective",
    summary="GRPO without std scaling and with a constant loss normalizer: no length or difficulty bias.",
    advantage="grpo", advantage_kw={"scale": "none"}, agg="seq-mean-token-sum-norm"))

define(Recipe(
    key="dapo_lite", title="DAPO: An Open-Source LLM Reinforcement Learning System at Scale",
    summary="DAPO without dynamic sampling: clip-higher (0.2/0.28), token-level loss, no KL, truncated "
            "responses masked.",
    advantage="grpo", objective_kw={"eps_low": 0.2, "eps_high": 0.28}, agg="token-mean",
    token_masks=("overlong-filter",)))

define(Recipe(
    key="rloo",
    title="Back to Basics: Revisiting REINFORCE Style Optimization for Learning from Human Feedback in LLMs",
    summary="Leave-one-out baseline; k1 KL subtracted from the reward (TRL RLOO, beta 0.05).",
    advantage="rloo", agg="token-mean", kl_placement="reward", kl_estimator="k1", kl_coef=0.05))

define(Recipe(
    key="ppo", title="Proximal Policy Optimization Algorithms",
    summary="Critic + GAE advantages, PPO clip, k1 KL per token in the reward (TRL PPO defaults).",
    advantage="gae", advantage_kw={"gamma": 1.0, "lam": 0.95}, agg="token-mean",
    kl_placement="reward", kl_estimator="k1", kl_coef=0.05, critic=True))
