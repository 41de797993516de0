"""Recipes: named, frozen compositions of registered components, split by family."""
from workbench.recipes.base import RECIPES, SLOTS, Recipe, Use, define, get_recipe, use, with_overrides
from workbench.recipes import (  # noqa: F401  (registration at import)
    agents, canonical, capo, credit, data_curricula, data_dots, data_filters, data_offpolicy, data_replay,
    data_self_imitation, data_self_training, data_supervision, entropy_control, entropy_mechanism, entropy_target,
    feedback, guidance, hybrid, multiagent, multiagent_cory, multiagent_lspo, multiagent_ssp, preference,
    reward_agents, reward_design, reward_format, reward_length, reward_process, reward_search, rollout_control,
    routing, token_shaping, trust_masks, trust_region)

__all__ = ["RECIPES", "SLOTS", "Recipe", "Use", "define", "get_recipe", "use", "with_overrides"]
