"""Run configuration: overrides and bad config."""
import pytest

from workbench.train import Trainer, apply_sets, make_config


def test_overrides_and_bad_config():
    config = apply_sets(make_config("smoke"), ["steps=3", "recipe_overrides.kl_coef=0", "task_kw.digits=3"])
    assert config.steps == 3 and config.recipe_overrides == {"kl_coef": 0} and config.task_kw == {"digits": 3}
    with pytest.raises(ValueError, match="unknown config key"):
        apply_sets(config, ["stepz=3"])
    with pytest.raises(ValueError, match="unknown preset"):
        make_config("medium")
    with pytest.raises(KeyError, match="no recipe named"):
        Trainer(make_config("smoke", recipe="nope"), "/tmp/never")
    with pytest.raises(ValueError, match="unknown recipe override"):
        Trainer(make_config("smoke", recipe_overrides={"kl_cof": 1}), "/tmp/never")
