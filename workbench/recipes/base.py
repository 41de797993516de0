"""Recipes: named, frozen compositions of registered components, one list per pipeline slot.

    grpo = Recipe(advantage=[use("grpo")], objective=use("ppo-clip"), agg="seq-mean-token-mean",
                  regularizers=[use("kl-penalty", beta=0.04, estimator="k3")])

The training loop only looks the components up (`workbench.train.pipeline`); it never branches on a method.
"""
from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field

from workbench import registry


@dataclass(frozen=True)
class Use:
    """One registered component in a recipe: its key, its keyword arguments, and for controllers and
    schedules the component parameter it drives (`into="regularizer:kl-penalty.beta"`)."""

    key: str
    kw: dict = field(default_factory=dict)
    into: str = ""


def use(key: str, *, into: str = "", **kw) -> Use:
    return Use(key, kw, into)


# recipe field -> registry kind; the order is the pipeline's (see workbench.train.pipeline.STAGES)
SLOTS = {
    "sampler": "sampler", "rollout": "rollout", "rewards": "reward", "group_transforms": "group_transform",
    "reward_shaping": "reward_shaping", "advantage": "advantage", "token_masks": "token_mask",
    "objective": "objective", "regularizers": "regularizer", "value": "value", "controllers": "controller",
    "schedules": "schedule", "buffers": "buffer", "reference": "reference",
}
SINGLE = ("sampler", "rollout", "objective", "value", "reference")  # one component (value: or none)
SCALARS = ("agg", "task_reward", "reward_aggregation")  # recipe fields an override sets directly
KL_KEYS = {("regularizer", "kl-penalty"), ("reward_shaping", "kl-in-reward")}  # the two placements of kl-penalty


@dataclass(frozen=True)
class Recipe:
    key: str
    title: str                         # the paper the recipe follows
    summary: str
    advantage: tuple = ()              # a chain: later entries may read batch.advantages
    objective: Use = Use("ppo-clip")
    agg: str = "token-mean"            # loss aggregation mode (objective, regularizers, value loss)
    regularizers: tuple = ()           # additive loss terms (KL in the loss, entropy bonus)
    value: Use | None = None           # a critic: value head + loss on the advantage's targets
    rewards: tuple = ()                # reward functions added to the environment's reward (`weight` kw)
    task_reward: float = 1.0           # weight of the environment's verifier score among the rewards (0: left out)
    reward_aggregation: str = "sum_then_normalize"  # or "normalize_then_sum" (TRL's multi_objective_aggregation)
    reward_shaping: tuple = ()         # batch -> batch on rewards / token rewards, after the forward passes
    group_transforms: tuple = ()       # finished groups edited before the forward passes
    token_masks: tuple = ()            # which response tokens the update trains on
    controllers: tuple = ()            # stateful values driving a component parameter (`into`)
    schedules: tuple = ()              # functions of training progress driving a parameter (`into`)
    buffers: tuple = ()                # replay storage kept across steps
    reference: Use = Use("sft")        # what the policy starts from and the KL reference is
    rollout: Use = Use("turns")        # how samples are generated over the task's environment
    sampler: Use = Use("uniform")      # which examples enter the step

    def __post_init__(self):
        for name in SLOTS:  # accept lists and bare keys; store tuples of Use
            value = getattr(self, name)
            if name in SINGLE:
                object.__setattr__(self, name, None if value is None else as_use(value))
            else:
                object.__setattr__(self, name, tuple(as_use(v) for v in value))

    def uses(self) -> list[tuple[str, Use]]:
        """(registry kind, Use) of every component, in pipeline order."""
        out = []
        for name, kind in SLOTS.items():
            value = getattr(self, name)
            out += [(kind, u) for u in ((value,) if name in SINGLE else value) if u is not None]
        return out

    def components(self) -> list[tuple[str, str]]:
        """(kind, key) of every catalog component the recipe uses (the book's recipe cards)."""
        return [(kind, u.key) for kind, u in self.uses()] + [("aggregation", self.agg)]

    def kl_term(self) -> Use | None:
        """The recipe's KL-to-reference term (in the loss or in the reward), if any."""
        return next((u for kind, u in self.uses() if (kind, u.key) in KL_KEYS), None)

    def as_dict(self) -> dict:
        return asdict(self)


def as_use(value) -> Use:
    """A Use from a Use, a key, or a [key, kwargs] / [key, kwargs, into] list (JSON overrides)."""
    if isinstance(value, Use):
        return value
    if isinstance(value, str):
        return Use(value)
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], str) and len(value) <= 3:
        return Use(value[0], dict(value[1]) if len(value) > 1 else {}, value[2] if len(value) > 2 else "")
    raise ValueError(f"a recipe component is a key, [key, kwargs] or [key, kwargs, into]; got {value!r}")


@dataclass(frozen=True)
class PreferenceRecipe:
    key: str
    title: str                      # the paper the recipe follows
    summary: str
    loss: str                       # registered preference objective key
    loss_kw: dict = field(default_factory=dict)
    loss_inputs: tuple = ()         # extra per-item inputs by name, "kw=source" to rename (e.g. "rewards=list_rewards")
    online: bool = False            # items from the current policy's samples each step (labelled by the verifier)
    data: str = "pairs"             # offline: pairs | lists | degraded | steps; online: pairs | lists | siblings
    iteration_steps: int = 0        # > 0: the anchors move (iteration_update) every this many steps
    iteration_update: str = "ref"   # "ref": π_ref ← π; "prev": π_t ← π (π_ref fixed); "momentum": π̂_{t-1} ← π_ref ← π
    list_size: int = 0              # K responses per prompt for data="lists" (ranked by the verifier)
    degrade_fractions: tuple = (1 / 3, 2 / 3)  # data="degraded": share of the chosen answer's digits removed per copy
    step_chars: int = 0             # step-level data: characters per reasoning step
    rollouts_per_state: int = 4     # step-level data: continuations per state for the Monte Carlo value V̂(s)

    def components(self) -> list[tuple[str, str]]:
        return [("preference", self.loss)]

    def as_dict(self) -> dict:
        return asdict(self)


RECIPES: dict[str, Recipe | PreferenceRecipe] = {}


def define(recipe: Recipe | PreferenceRecipe) -> Recipe | PreferenceRecipe:
    RECIPES[recipe.key] = recipe
    registry.register("recipe", recipe.key, title=recipe.title, summary=recipe.summary,
                      defaults=recipe.as_dict(), family="canonical",
                      confidence=registry.catalog().get(recipe.key, {}).get("confidence", "exact"))(recipe)
    return recipe


def get_recipe(key: str) -> Recipe | PreferenceRecipe:
    if key not in RECIPES:
        raise KeyError(f"no recipe named {key!r}; recipes: {', '.join(sorted(RECIPES))}")
    return RECIPES[key]


# ------------------------------------------------------------------------------------ overrides

LEGACY = {"objective_kw": "objective", "advantage_kw": "advantage"}  # run folders from before the pipeline


def with_overrides(recipe: Recipe, overrides: dict, *, kl_coef: float | None = None,
                   entropy_coef: float | None = None) -> Recipe:
    """The recipe with `overrides` applied, each key one of:

      "<slot>": {kwargs}            merged into the slot's component (the only one of a list slot)
      "<slot>:<key>": {kwargs}      merged into the component `key` of a list slot
      "<slot>": "key" | [key, kw]   replaces a single slot (e.g. {"objective": "tis"})
      "<slot>": [[key, kw], ...]    replaces a list slot
      "agg": "token-mean"           (and "task_reward": 0.0, "reward_aggregation": "normalize_then_sum")
    `kl_coef` sets the beta of the recipe's KL term (adding k3 KL in the loss when it has none and beta > 0);
    `entropy_coef` the coefficient of the entropy bonus (added when absent).
    """
    changes = {}
    for name, value in overrides.items():
        name = LEGACY.get(name, name)
        if name == "kl_coef":
            kl_coef = value
            continue
        slot, _, key = name.partition(":")
        if slot in SCALARS:
            changes[slot] = value
        elif slot not in SLOTS:
            valid = sorted([*SLOTS, *SCALARS, "kl_coef"])
            raise ValueError(f"unknown recipe override {name!r}; use a slot name ({', '.join(valid)}), optionally "
                             f"with ':<key>' to pick one component of a list slot")
        else:
            changes[slot] = _override_slot(recipe, slot, key, value, changes.get(slot, getattr(recipe, slot)))
    recipe = dataclasses.replace(recipe, **changes)
    if kl_coef is not None:
        recipe = _set_kl_beta(recipe, kl_coef)
    if entropy_coef is not None:
        recipe = _set_param(recipe, "regularizers", "entropy-bonus", "coef", entropy_coef, add=entropy_coef != 0)
    return recipe


def _override_slot(recipe: Recipe, slot: str, key: str, value, current):
    if slot in SINGLE:
        if isinstance(value, dict):
            if current is None:
                raise ValueError(f"recipe {recipe.key!r} has no {slot} component to set {value} on")
            return Use(current.key, {**current.kw, **value}, current.into)
        return as_use(value)
    if isinstance(value, dict):
        matches = [i for i, u in enumerate(current) if not key or u.key == key]
        if len(matches) != 1:
            have = [u.key for u in current] or "none"
            raise ValueError(f"recipe {recipe.key!r}: override {slot}{':' + key if key else ''} must name exactly one "
                             f"component of {slot} ({have}); use '{slot}:<key>'")
        i = matches[0]
        return current[:i] + (Use(current[i].key, {**current[i].kw, **value}, current[i].into),) + current[i + 1:]
    return tuple(as_use(v) for v in value)


def _set_kl_beta(recipe: Recipe, beta: float) -> Recipe:
    """beta = 0 removes the KL term (no reference pass is needed for it) unless a controller drives it."""
    for slot, kind in (("regularizers", "regularizer"), ("reward_shaping", "reward_shaping")):
        if any((kind, u.key) in KL_KEYS for u in getattr(recipe, slot)):
            key = "kl-penalty" if slot == "regularizers" else "kl-in-reward"
            driven = any(u.into.startswith(f"{kind}:{key}.") for u in recipe.controllers)
            if beta == 0 and not driven:
                return dataclasses.replace(recipe, **{slot: tuple(u for u in getattr(recipe, slot) if u.key != key)})
            return _set_param(recipe, slot, key, "beta", beta)
    return _set_param(recipe, "regularizers", "kl-penalty", "beta", beta, add=beta != 0)


def _set_param(recipe: Recipe, slot: str, key: str, param: str, value, add: bool = False) -> Recipe:
    current = getattr(recipe, slot)
    if any(u.key == key for u in current):
        new = tuple(Use(u.key, {**u.kw, param: value}, u.into) if u.key == key else u for u in current)
    elif add:
        new = current + (Use(key, {param: value}),)
    else:
        return recipe
    return dataclasses.replace(recipe, **{slot: new})
