"""Recipes: named, frozen compositions of registered components, split by family."""
from workbench.recipes.base import (RECIPES, SLOTS, PreferenceRecipe, Recipe, Use, define, get_recipe, use,
                                    with_overrides)
from workbench.recipes import agents, canonical, preference  # noqa: F401  (registration at import)

__all__ = ["RECIPES", "SLOTS", "PreferenceRecipe", "Recipe", "Use", "define", "get_recipe", "use", "with_overrides"]
