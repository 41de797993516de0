"""Run coefficients (kl_coef, entropy_coef): one spelling, set on the components that declare them."""
import dataclasses

import pytest

from workbench import registry
from workbench.recipes import get_recipe, use, with_overrides
from workbench.recipes.base import coefficient_holders, with_coefficients


def test_kl_coef_sets_the_parameter_each_component_declares_as_it():
    assert with_coefficients(get_recipe("grpo"), kl_coef=0.3).kl_term().kw["beta"] == 0.3         # in the loss
    assert with_coefficients(get_recipe("rloo"), kl_coef=0.2).kl_term().kw["beta"] == 0.2         # in the reward
    dpo = with_coefficients(get_recipe("dpo"), kl_coef=0.5)                                        # DPO's own beta
    assert dpo.objective.kw["beta"] == 0.5 and dpo.kl_term() is None
    assert [(s, u.key, p) for s, u, p in coefficient_holders(get_recipe("grpo"), "kl_coef")] == [
        ("regularizers", "kl-penalty", "beta")]


def test_zero_removes_a_kl_term_unless_it_is_driven_but_never_an_objective():
    assert with_coefficients(get_recipe("grpo"), kl_coef=0.0).kl_term() is None
    driven = dataclasses.replace(get_recipe("grpo"),
                                 controllers=(use("adaptive-kl", into="regularizer:kl-penalty.beta"),))
    assert with_coefficients(driven, kl_coef=0.0).kl_term().kw["beta"] == 0.0
    assert with_coefficients(get_recipe("dpo"), kl_coef=0.0).objective.kw["beta"] == 0.0
    assert with_coefficients(get_recipe("dapo"), kl_coef=0.0) == get_recipe("dapo")  # none to remove, none added


def test_a_recipe_without_the_coefficient_gets_its_component_added():
    assert with_coefficients(get_recipe("dapo"), kl_coef=0.5).kl_term().key == "kl-penalty"
    grpo = with_coefficients(get_recipe("grpo"), entropy_coef=0.01)
    assert grpo.regularizers[-1].key == "entropy-bonus" and grpo.regularizers[-1].kw == {"coef": 0.01}
    kept = with_coefficients(grpo, entropy_coef=0.0)  # an entropy bonus at 0 stays (it still logs entropy)
    assert kept.regularizers[-1].kw == {"coef": 0.0}


def test_other_spellings_are_refused_naming_the_one():
    grpo = get_recipe("grpo")
    with pytest.raises(ValueError, match=r"recipe_overrides.kl_coef: .* use --set kl_coef=0"):
        with_overrides(grpo, {"kl_coef": 0})
    with pytest.raises(ValueError, match=r"beta of regularizer 'kl-penalty' is the run's kl_coef: set it with "
                                         r"--set kl_coef=0.1"):
        with_overrides(grpo, {"regularizers:kl-penalty": {"beta": 0.1}})
    with pytest.raises(ValueError, match=r"beta of objective 'preference' is the run's kl_coef"):
        with_overrides(get_recipe("dpo"), {"objective": {"beta": 0.2}})
    with pytest.raises(ValueError, match="unknown run coefficients"):
        with_coefficients(grpo, kl_coeff=1)


def test_a_component_declares_only_known_coefficients():
    with pytest.raises(ValueError, match=r"declares coefficients \['klcoef'\]"):
        registry.register("regularizer", "probe-coefficient", title="t", summary="s", coefficients={"klcoef": "b"})
    declared = {(e.kind, e.key): e.coefficients for e in registry.entries() if e.coefficients}
    assert declared == {("regularizer", "kl-penalty"): {"kl_coef": "beta"},
                        ("regularizer", "remix"): {"kl_coef": "beta"},  # KL-Convex: beta times the convex mix
                        ("reward_shaping", "kl-in-reward"): {"kl_coef": "beta"},
                        ("objective", "preference"): {"kl_coef": "beta"},
                        ("regularizer", "entropy-bonus"): {"entropy_coef": "coef"}}


def test_the_logged_kl_uses_the_estimator_the_kl_term_declares():
    assert get_recipe("grpo").kl_estimator() == "k3" and get_recipe("dapo").kl_estimator() == "k3"  # none: k3
    rloo = get_recipe("rloo")
    assert rloo.kl_term().key == "kl-in-reward" and rloo.kl_estimator() == rloo.kl_term().kw["estimator"]
    bare = dataclasses.replace(rloo, reward_shaping=(use("kl-in-reward", beta=0.1),))
    assert bare.kl_estimator() == "k1"  # the component's own default, not a guess
    assert registry.get("reward_shaping", "kl-in-reward").kl_estimator == "estimator"
