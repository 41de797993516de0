"""`workbench inspect RUN`: a run's replay buffer (age, reward, prompt) and prompt pool (pass rates per prompt over
the steps, the choice of each step), read from a kept checkpoint's pipeline.pt without the model."""
import json

import pytest

from tests.helpers import TINY
from workbench.cli import main
from workbench.train import make_config, train
from workbench.train.inspection import inspect_run


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("arpo") / "run"
    config = make_config("smoke", recipe="arpo-gui", **{**TINY, "steps": 6, "checkpoint_every": 3, "group_size": 4,
                                                        "recipe_overrides": {"sampler": {"size": 8}}})
    train(config, out, progress=False)
    return out


def test_inspect_shows_the_pool_and_the_buffer_of_a_kept_checkpoint(run):
    info = inspect_run(run)
    assert info["step"] == 6 and set(info["components"]) == {"sampler:pool", "group_transform:arpo-gui"}
    pool = info["components"]["sampler:pool"]
    assert pool["size"] == 8 and pool["steps"] == 6 and [s for s, _ in pool["chosen"]] == list(range(6))
    assert all(len(ids) == TINY["prompts_per_step"] for _, ids in pool["chosen"])
    times = sum(len(p["pass_rates"]) for p in pool["prompts"])
    assert times == 6 * TINY["prompts_per_step"]  # every chosen prompt got its pass rate that step
    assert all(0.0 <= r <= 1.0 for p in pool["prompts"] for _, r in p["pass_rates"])
    buffer = info["components"]["group_transform:arpo-gui"]["buffer"]
    assert buffer["size"] == len(buffer["entries"]) <= buffer["capacity"]
    assert all(e["reward"] > 0.1 and e["age"] == 6 - e["step"] for e in buffer["entries"])
    prompts = {p["prompt"] for p in pool["prompts"]}
    assert {e["prompt"] for e in buffer["entries"]} <= prompts  # successes come from the pool's prompts
    earlier = inspect_run(run, step=3)["components"]["sampler:pool"]
    assert earlier["steps"] == 3 and earlier["chosen"] == pool["chosen"][:3]


def test_the_command_prints_tables_or_json_and_refuses_what_is_not_there(run, tmp_path, capsys):
    assert main(["inspect", str(run), "--rows", "3"]) == 0
    text = capsys.readouterr().out
    assert "sampler:pool: prompt pool of 8" in text and "group_transform:arpo-gui.buffer: replay buffer" in text
    assert "chose at step 5:" in text and "age  step  reward  prompt" in text
    assert main(["inspect", str(run), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["step"] == 6
    assert main(["inspect", str(run), "--step", "4"]) == 2
    assert "keeps no checkpoint at step 4; kept: 3, 6" in capsys.readouterr().err
    assert main(["inspect", str(tmp_path)]) == 2
    assert "has no kept checkpoint" in capsys.readouterr().err
    assert main(["inspect", str(run), "--rows", "0"]) == 2
    assert "--rows 0: show at least 1 entry" in capsys.readouterr().err
