"""The prompt pool: distinct prompts drawn once from the pool seed, walked an epoch at a time, each prompt's pass
rate kept over steps; a pool a task cannot fill, or smaller than a step, refused before training."""
import random

import pytest

from tests.helpers import DigitFirst, TINY, group_batch
from workbench.samplers.pool import PromptPool, check_pool
from workbench.tasks import get_task
from workbench.train import Trainer, make_config


def test_the_pool_is_distinct_prompts_fixed_by_its_seed_not_the_runs():
    task = get_task("addition")
    a, b = PromptPool.init(size=20), PromptPool.init(size=20)
    PromptPool.select(a, task, 4, random.Random("run-seed-1"))
    PromptPool.select(b, task, 4, random.Random("run-seed-2"))
    assert a.examples == b.examples and len({e.prompt for e in a.examples}) == 20
    assert not {e.prompt for e in a.examples} & task.held_out_prompts()
    c = PromptPool.init(size=20, pool_seed=1)
    PromptPool.select(c, task, 4, random.Random(0))
    assert c.examples != a.examples


def test_epoch_order_takes_every_prompt_once_per_epoch_and_distinct_prompts_per_step():
    state, task = PromptPool.init(size=10), get_task("addition")
    chosen = [PromptPool.select(state, task, 4, random.Random(step)) for step in range(5)]  # 20 = two epochs
    ids = [i for _, step_ids in state.chosen for i in step_ids]
    assert sorted(ids[:8]) == sorted(set(ids[:8])) and all(len(set(s)) == 4 for _, s in state.chosen)
    assert sorted(ids[:10]) == list(range(10)) and sorted(ids[10:]) == list(range(10))  # straddling step included
    assert state.epoch == 2 and [e.prompt for e in chosen[0]] == [state.examples[i].prompt for i in state.chosen[0][1]]


def test_pass_rates_are_kept_per_prompt_over_steps_and_bounded():
    state, task = PromptPool.init(size=4, history=2), DigitFirst()
    for step in range(3):
        examples = PromptPool.select(state, task, 2, random.Random(step))
        batch = group_batch([1.0, 0.0, 0.0, 0.0], [0, 0, 1, 1])
        batch.scores, batch.prompts = batch.rewards.clone(), [examples[0].prompt] * 2 + [examples[1].prompt] * 2
        PromptPool.update(state, batch)
        first, second = (state.id_of(e.prompt) for e in examples)
        assert state.pass_rates[first][-1] == (step, 0.5) and state.pass_rates[second][-1] == (step, 0.0)
    assert state.steps == 3 and len(state.chosen) == 2 and all(len(h) <= 2 for h in state.pass_rates.values())


def test_a_pool_that_cannot_serve_the_run_is_refused_before_training(tmp_path):
    with pytest.raises(ValueError, match=r"prompts_per_step=4 is more than the pool's size=3.*sampler.size=4"):
        PromptPool.check_run(DigitFirst(), 4, size=3)
    with pytest.raises(ValueError, match=r"'digit_first' gave only 10 distinct training prompts .* size=64"):
        PromptPool.check_run(DigitFirst(), 4, size=64)
    config = make_config("smoke", recipe="arpo-gui", **{**TINY, "prompts_per_step": 70})
    with pytest.raises(ValueError, match=r"recipe 'arpo-gui', sampler:pool: prompts_per_step=70 is more than"):
        Trainer(config, tmp_path / "run")
    assert not (tmp_path / "run").exists()  # refused before the run folder is made


@pytest.mark.parametrize("kw, match", [({"size": 0}, "size must be an integer >= 1"),
                                       ({"history": 0}, "history must be an integer >= 1"),
                                       ({"order": "sorted"}, "order must be 'epoch' or 'random'")])
def test_bad_pool_settings_are_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        check_pool(**kw)
