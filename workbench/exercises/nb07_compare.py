"""The exercises of notebook 07_compare (comparing recipes): each answer is checked against the library's own
math."""
from __future__ import annotations


def check_recipes_without_kl(answer, recipes) -> str:
    """Exercise: the recipes (among `recipes`) whose loss and reward carry no KL term."""
    from workbench.recipes import get_recipe

    expected = {k for k in recipes if get_recipe(k).kl_term() is None}
    if set(answer) != expected:
        raise AssertionError("not quite: look for a KL term in each recipe's regularizers (kl-penalty, in the loss) "
                             "and reward_shaping (kl-in-reward): get_recipe(key).kl_term()")
    return "correct"
