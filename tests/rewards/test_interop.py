"""External rewards ("module:function"): a module that is missing, broken or a factory that refuses its `build` is
refused in words when the recipe is built, before anything trains."""
import sys

import pytest

from workbench.recipes import Recipe, use
from workbench.rewards.interop import external_entry
from workbench.train.pipeline import Pipeline


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """Writes tmp/NAME.py with `source` and makes it importable."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(name, source):
        (tmp_path / f"{name}.py").write_text(source)
        monkeypatch.delitem(sys.modules, name, raising=False)
        return name
    return write


def test_a_module_with_a_syntax_error_or_a_failing_import_is_named(user_module):
    broken = user_module("broken_rewards", "def reward(completions, **kw)\n    return [1.0]\n")
    with pytest.raises(ValueError, match=r"reward 'broken_rewards:reward': importing 'broken_rewards' failed: "
                                         r"SyntaxError"):
        external_entry(f"{broken}:reward", {})
    failing = user_module("failing_rewards", "raise RuntimeError('needs a GPU')\n")
    with pytest.raises(ValueError, match=r"importing 'failing_rewards' failed: RuntimeError: needs a GPU"):
        external_entry(f"{failing}:reward", {})
    with pytest.raises(ValueError, match=r"no module 'no_such_rewards_module'"):
        external_entry("no_such_rewards_module:reward", {})


def test_a_misspelt_function_gets_the_closest_name(user_module):
    name = user_module("my_rewards", "def length_reward(completions, **kw):\n    return [1.0] * len(completions)\n")
    with pytest.raises(ValueError, match=r"cannot import 'lenght_reward' from 'my_rewards' \(did you mean "
                                         r"'length_reward'\?\)"):
        external_entry(f"{name}:lenght_reward", {})


def test_a_factory_that_refuses_build_is_named_with_what_it_takes(user_module):
    name = user_module("factory_rewards", "def make(max_len):\n    def reward(completions, **kw):\n"
                                          "        return [0.0] * len(completions)\n    return reward\n")
    assert callable(external_entry(f"{name}:make", {"build": {"max_len": 4}}).fn)
    with pytest.raises(ValueError, match=r"build=\{'max_lenn': 4\} failed: TypeError: .*; it takes \['max_len'\]"):
        external_entry(f"{name}:make", {"build": {"max_lenn": 4}})
    with pytest.raises(ValueError, match=r"build=16 must be a mapping"):
        external_entry(f"{name}:make", {"build": 16})
    recipe = Recipe(key="r", title="t", summary="s", advantage=["grpo"],
                    rewards=[use(f"{name}:make", build={"max_lenn": 4})])
    with pytest.raises(ValueError, match="failed: TypeError"):  # the same, when the recipe is built
        Pipeline(recipe)


def test_a_reward_returning_the_wrong_number_of_values_is_refused_before_the_run_folder_exists(user_module, tmp_path):
    """It used to fail at the first step, after the warm start and the held-out evaluation."""
    from workbench.train import Trainer, make_config

    name = user_module("short_rewards", "def one(completions, **kw):\n    return [1.0]\n")
    config = make_config("smoke", recipe="grpo", sft_steps=50,
                         recipe_overrides={"rewards": [[f"{name}:one", {"weight": 0.5}]]})
    with pytest.raises(ValueError, match=r"reward 'one' returned 1 values for 2 completions"):
        Trainer(config, tmp_path / "run")
    assert not (tmp_path / "run").exists()
