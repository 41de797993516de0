"""Recipes: named, frozen compositions of registered components, one list per pipeline slot.

    grpo = Recipe(advantage=[use("grpo")], objective=use("ppo-clip"), agg="seq-mean-token-mean",
                  regularizers=[use("kl-penalty", beta=0.04, estimator="k3")])

The training loop only looks the components up (`workbench.train.pipeline`); it never branches on a method.
"""
from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field

from workbench import registry
from workbench.stages import SINGLE, SLOTS  # recipe field -> registry kind, in pipeline order


@dataclass(frozen=True)
class Use:
    """One registered component in a recipe: its key, its keyword arguments, and for controllers and
    schedules the component parameter it drives (`into="regularizer:kl-penalty.beta"`)."""

    key: str
    kw: dict = field(default_factory=dict)
    into: str = ""


def use(key: str, *, into: str = "", **kw) -> Use:
    return Use(key, kw, into)


SCALARS = ("agg", "task_reward", "reward_aggregation", "policies")  # recipe fields an override sets directly
POLICIES = ("shared", "separate")  # one policy plays every agent of a game, or one LoRA adapter per agent


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
    loss_weights: tuple = ()           # per-token weights of the objective's loss (rollout importance correction)
    controllers: tuple = ()            # stateful values driving a component parameter (`into`)
    schedules: tuple = ()              # functions of training progress driving a parameter (`into`)
    buffers: tuple = ()                # replay storage kept across steps
    reference: Use = Use("sft")        # what the policy starts from and the KL reference is
    rollout: Use = Use("turns")        # how samples are generated over the task's environment
    sampler: Use = Use("uniform")      # which examples enter the step
    policies: str = "shared"           # a game's agents: one shared policy, or "separate" LoRA adapters on one base

    def __post_init__(self):
        if self.policies not in POLICIES:
            raise ValueError(f"recipe {self.key!r}: policies must be one of {POLICIES}, got {self.policies!r}")
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
        """The recipe's KL-to-reference term (in the loss or in the reward), if any: the component that declares the
        estimator of the KL it adds (`Entry.kl_estimator`)."""
        return next((u for kind, u in self.uses() if getattr(_entry(kind, u.key), "kl_estimator", "")), None)

    def kl_estimator(self) -> str:
        """The estimator of the recipe's KL term, the one the step's logged `kl` (and a controller reading it) uses;
        k3 when the recipe has no KL term."""
        for kind, u in self.uses():
            param = getattr(_entry(kind, u.key), "kl_estimator", "")
            if param:
                return u.kw.get(param, registry.get(kind, u.key).defaults[param])
        return "k3"

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


# ------------------------------------------------------------------------------------ overrides

LEGACY = {"objective_kw": "objective", "advantage_kw": "advantage"}  # run folders from before the pipeline


def with_overrides(recipe: Recipe, overrides: dict, **coefficients) -> Recipe:
    """The recipe with `overrides` applied, each key one of:

      "<slot>": {kwargs}            merged into the slot's component (the only one of a list slot)
      "<slot>:<key>": {kwargs}      merged into the component `key` of a list slot
      "<slot>": "key" | [key, kw]   replaces a single slot (e.g. {"objective": "tis"})
      "<slot>": [[key, kw], ...]    replaces a list slot
      "agg": "token-mean"           (and "task_reward": 0.0, "reward_aggregation": "normalize_then_sum")
    then the run coefficients (`registry.COEFFICIENTS`: kl_coef=, entropy_coef=; None keeps the recipe's), set on the
    components that declare them (`with_coefficients`). A coefficient has that one spelling: setting it through an
    override is refused, naming it.
    """
    changes = {}
    for name, value in overrides.items():
        name = LEGACY.get(name, name)
        if name in registry.COEFFICIENTS:
            raise ValueError(f"recipe_overrides.{name}: {name} is a run setting, not a recipe part; use --set "
                             f"{name}={value}")
        slot, _, key = name.partition(":")
        if slot in SCALARS:
            changes[slot] = value
        elif slot not in SLOTS:
            valid = sorted([*SLOTS, *SCALARS])
            raise ValueError(f"unknown recipe override {name!r}; use a slot name ({', '.join(valid)}), optionally "
                             f"with ':<key>' to pick one component of a list slot")
        else:
            changes[slot] = _override_slot(recipe, slot, key, value, changes.get(slot, getattr(recipe, slot)))
    return with_coefficients(dataclasses.replace(recipe, **changes), **coefficients)


def _entry(kind: str, key: str):
    """The registered component, or None for a key the pipeline will refuse with the list of known ones."""
    return next((e for e in registry.entries(kind) if e.key == key), None)


def _refuse_coefficients(slot: str, use: Use, kw: dict) -> None:
    """A parameter that is a run coefficient has one spelling, --set NAME=X: an override of it is refused."""
    entry = _entry(SLOTS[slot], use.key)
    for name, param in (entry.coefficients.items() if entry else ()):
        if param in kw:
            raise ValueError(f"{param} of {SLOTS[slot]} {use.key!r} is the run's {name}: set it with --set "
                             f"{name}={kw[param]}")


def _override_slot(recipe: Recipe, slot: str, key: str, value, current):
    if slot in SINGLE:
        if isinstance(value, dict):
            if current is None:
                raise ValueError(f"recipe {recipe.key!r} has no {slot} component to set {value} on")
            _refuse_coefficients(slot, current, value)
            return Use(current.key, {**current.kw, **value}, current.into)
        return as_use(value)
    if isinstance(value, dict):
        matches = [i for i, u in enumerate(current) if not key or u.key == key]
        if len(matches) != 1:
            have = [u.key for u in current] or "none"
            raise ValueError(f"recipe {recipe.key!r}: override {slot}{':' + key if key else ''} must name exactly one "
                             f"component of {slot} ({have}); use '{slot}:<key>'")
        i = matches[0]
        _refuse_coefficients(slot, current[i], value)
        return current[:i] + (Use(current[i].key, {**current[i].kw, **value}, current[i].into),) + current[i + 1:]
    return tuple(as_use(v) for v in value)


# A recipe with no component taking a coefficient gets this one when the value is not 0; kl_coef = 0 removes a KL
# term in the loss or the reward (and the reference pass it needs) unless a controller or schedule drives it.
ADDED = {"kl_coef": ("regularizers", "kl-penalty"), "entropy_coef": ("regularizers", "entropy-bonus")}
REMOVED_AT_ZERO = ("kl_coef",)


def coefficient_holders(recipe: Recipe, name: str) -> list[tuple[str, Use, str]]:
    """(slot, Use, parameter) of every component of `recipe` whose parameter is run coefficient `name`."""
    slot_of = {kind: slot for slot, kind in SLOTS.items()}
    out = []
    for kind, u in recipe.uses():
        entry = _entry(kind, u.key)
        if entry is not None and name in entry.coefficients:
            out.append((slot_of[kind], u, entry.coefficients[name]))
    return out


def with_coefficients(recipe: Recipe, **values) -> Recipe:
    """Set each run coefficient (None: keep the recipe's) on the components that declare it (`ADDED`,
    `REMOVED_AT_ZERO`)."""
    unknown = sorted(set(values) - set(registry.COEFFICIENTS))
    if unknown:
        raise ValueError(f"unknown run coefficients {unknown}; they are {sorted(registry.COEFFICIENTS)}")
    for name, value in values.items():
        if value is not None:
            recipe = _set_coefficient(recipe, name, value)
    return recipe


def _set_coefficient(recipe: Recipe, name: str, value: float) -> Recipe:
    holders = coefficient_holders(recipe, name)
    if not holders:
        if value == 0:
            return recipe
        slot, key = ADDED[name]
        param = registry.get(SLOTS[slot], key).coefficients[name]
        return dataclasses.replace(recipe, **{slot: getattr(recipe, slot) + (Use(key, {param: value}),)})
    drivers = {u.into for u in recipe.controllers + recipe.schedules}
    for slot, u, param in holders:
        driven = f"{SLOTS[slot]}:{u.key}.{param}" in drivers
        removed = value == 0 and name in REMOVED_AT_ZERO and slot not in SINGLE and not driven
        new = None if removed else Use(u.key, {**u.kw, param: value}, u.into)
        if slot in SINGLE:
            recipe = dataclasses.replace(recipe, **{slot: new})
        else:
            recipe = dataclasses.replace(recipe, **{slot: tuple(x for x in (new if v is u else v
                                                                            for v in getattr(recipe, slot))
                                                                if x is not None)})
    return recipe

