"""Component parameters: types from defaults (or the declared alternatives), ranges by name, and the pipeline refusing a
misspelt or ill-typed setting before anything runs."""
import inspect
import math

import pytest

import workbench.registrations  # noqa: F401  (every component registered)
from workbench import registry
from workbench.params import (ALTERNATIVES, NOT_SETTINGS, OPTIONAL_TYPES, RANGES, check_choice, check_value,
                              did_you_mean, kind_of, type_error)
from workbench.recipes import RECIPES, Recipe, get_recipe, use, with_overrides
from workbench.train import Trainer, make_config
from workbench.train.pipeline import Pipeline

SETTABLE = [(kind, e.key, name, default) for kind in registry.KINDS if kind not in ("recipe", "env")
            for e in registry.entries(kind) for name, default in e.defaults.items() if name not in ("agg", "denom")]


def test_every_registered_default_is_a_value_its_own_check_accepts_and_every_setting_has_a_type():
    """The oracle for the rules: what every component ships with passes them (a range that refuses a default is
    wrong for some component that shares the name); and no setting is left untyped (the preference losses' keywords
    are the batch's inputs, declared by `inputs`)."""
    for kind, key, name, default in SETTABLE:
        if name not in NOT_SETTINGS:
            check_value(f"{kind} {key!r}", name, default, default)
    assert len(SETTABLE) > 600
    untyped = [(kind, key, name) for kind, key, name, default in SETTABLE
               if kind != "preference" and name not in NOT_SETTINGS and kind_of(default, name) is None]
    assert not untyped


def test_the_name_tables_name_parameters_that_exist():
    names = {name for *_, name, _ in SETTABLE}
    assert set(RANGES) <= names and set(OPTIONAL_TYPES) <= names and set(ALTERNATIVES) <= names
    assert set(NOT_SETTINGS) <= names


@pytest.mark.parametrize("value, kind, error", [
    (True, int, "needs a whole number"), (1.5, int, "needs a whole number"), (3, int, None),
    ("abc", float, "needs a number"), (True, float, "needs a number"), (2, float, None),
    (math.nan, float, "needs a finite number"), (math.inf, float, "needs a finite number"),
    ("no", bool, "needs true or false"), (0, bool, "needs true or false"), (False, bool, None),
    (3, str, "needs a string"), ("x", str, None), ("a", list, "needs a list"), ([1], list, None),
    ("keep", (bool, "keep"), None), (True, (bool, "keep"), None), ("kep", (bool, "keep"), "needs one of bool, 'keep'"),
    (1, (bool, "keep"), "needs one of"), (None, (int, None), None), (1.5, (int, None), "needs one of int, None"),
    ({"any": 1}, None, None), ({"a": 1}, dict, None), ([1], dict, "needs a mapping"), (len, callable, None),
    ("len", callable, "needs a Python callable"),
])
def test_type_rules(value, kind, error):
    assert type_error(value, kind) == error if error is None else error in type_error(value, kind)


def test_kinds_come_from_the_default_or_the_tables():
    assert kind_of(0.2, "eps_high") is float and kind_of(3, "every") is int and kind_of((1, 2), "budgets") is list
    assert kind_of(None, "dual_clip_c") is float and kind_of(None, "judge") is callable and kind_of(None, "x") is None
    assert kind_of(False, "allow_singletons") == (bool, "keep")


def test_ranges_refuse_values_outside_and_name_what_the_parameter_is():
    with pytest.raises(ValueError, match=r"ppo-clip: eps_high=-5 is out of range: the clip width above 1 must be >= 0"):
        check_value("ppo-clip", "eps_high", -5, 0.2)
    with pytest.raises(ValueError, match=r"dual_clip_c=1 is out of range: .* must be > 1"):
        check_value("dual-clip", "dual_clip_c", 1, 3.0)
    with pytest.raises(ValueError, match=r"label_smoothing=0.6 is out of range: .* must be >= 0 and <= 0.5"):
        check_value("cdpo-robust", "label_smoothing", 0.6, 0.1)
    check_value("dual-clip", "dual_clip_c", None, None)  # off, as its default
    check_value("ppo-clip", "eps_high", 0, 0.2)


def test_every_declared_choice_names_a_setting_and_holds_its_default():
    for kind in registry.KINDS:
        for e in registry.entries(kind):
            for name, options in e.choices.items():
                assert name in e.defaults and e.defaults[name] in options, (kind, e.key, name)


def test_a_check_defaults_the_settings_it_checks_as_its_component_does():
    """A recipe gives `check` only the settings it changes: the others must default as the component's do (a check
    combining cispo's cap_abs with eps_low must see cap_abs=5.0 when the recipe leaves it)."""
    for kind in registry.KINDS:
        for e in registry.entries(kind):
            for name, p in (inspect.signature(e.check).parameters.items() if e.check else ()):
                if p.default is not inspect.Parameter.empty and name in e.defaults:
                    assert p.default == e.defaults[name], (kind, e.key, name)


def test_a_value_outside_the_declared_choices_is_refused_with_the_closest_option():
    with pytest.raises(ValueError, match=r"grpo: scale='grup' is not one of \['group', 'batch', 'none'\] \(did you "
                                         r"mean 'group'\?\)"):
        check_choice("grpo", "scale", "grup", ("group", "batch", "none"))
    with pytest.raises(ValueError, match=r"is not one of \[False, True, 'keep'\]"):
        check_choice("grpo", "allow_singletons", 1, (False, True, "keep"))
    check_choice("grpo", "scale", "none", ("group", "batch", "none"))


def test_did_you_mean_offers_the_closest_name_or_nothing():
    assert did_you_mean("wieght", ["weight", "max_len"]) == " (did you mean 'weight'?)"
    assert did_you_mean("zzz", ["weight"]) == ""


# ----------------------------------------------------------------------------- the pipeline, before anything runs


@pytest.mark.parametrize("recipe, overrides, message", [
    # the cases: a reward keyword typo trained to the end with weight 1; eps_high=-5 and "abc" trained
    ("cosine-length", {"rewards": [["cosine-length", {"wieght": 0.5}]]},
     r"reward 'cosine-length' takes no 'wieght' \(did you mean 'weight'\?\)"),
    ("grpo", {"objective": {"eps_high": -5}}, r"objective 'ppo-clip': eps_high=-5 is out of range"),
    ("grpo", {"objective": {"eps_high": "abc"}}, r"objective 'ppo-clip': eps_high='abc' needs a number \(default 0.2\)"),
    ("cosine-length", {"rewards": [["cosine-length", {"weight": "half"}]]}, r"weight='half' needs a number"),
    ("grpo", {"advantage": [["grpo", {"allow_singletons": "yes"}]]}, r"allow_singletons='yes' needs one of bool"),
    ("cdpo-robust", {"objective": {"label_smoothing": 0.7}},
     r"preference loss 'cdpo-robust': label_smoothing=0.7 is out of range"),
    ("dpo", {"objective": {"betta": 0.2}}, r"preference loss 'dpo' takes no \['betta'\] \(did you mean 'beta'\?\)"),
    ("grpo", {"objective": {"agg": "token-sum"}}, r"agg is the pipeline's to pass .* recipe_overrides.agg=MODE"),
])
def test_a_bad_component_setting_is_refused_when_the_recipe_is_built(recipe, overrides, message):
    with pytest.raises(ValueError, match=message):
        Pipeline(with_overrides(get_recipe(recipe), overrides))


def test_a_controller_setting_of_the_wrong_type_is_refused_before_the_run_folder_exists(tmp_path):
    """adaptive-kl target="high" used to fail after SFT and the held-out evaluation."""
    recipe = Recipe(key="r", title="t", summary="s", advantage=["grpo"], regularizers=[use("kl-penalty", beta=0.1)],
                    controllers=[use("adaptive-kl", into="regularizer:kl-penalty.beta", target="high")])
    with pytest.raises(ValueError, match=r"controller 'adaptive-kl': target='high' needs a number \(default 6.0\)"):
        Pipeline(recipe)
    config = make_config("smoke", recipe="grpo", recipe_overrides={"objective": {"eps_high": -5}})
    with pytest.raises(ValueError, match="eps_high=-5 is out of range"):
        Trainer(config, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_every_recipe_passes_its_own_checks():
    for recipe in RECIPES.values():
        Pipeline(recipe)
