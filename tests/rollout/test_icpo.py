"""ICPO's in-context steered rollout: which rows are steered, with which demonstrations, and that they are trained
under the plain prompt (catalog test 3: no demonstration token in the training forward pass)."""
import random

import pytest
import torch

from tests.helpers import TINY, metric_rows, resumes_exactly
from tests.rollout.scripted import PromptSpy
from workbench import registry
from workbench.rollout import Sampling, turns
from workbench.rollout.icpo import ICL_TEMPLATE, demonstration, icpo_rollout
from workbench.tasks import get_task
from workbench.train.config import make_config
from workbench.train.trainer import Trainer

pytestmark = pytest.mark.covers("icpo")


def test_registered_with_the_references_counts():
    entry = registry.get("rollout", "icpo")
    assert entry.defaults == {"n_off_policy": 1, "n_demo": 1} and "offpolicy_mask" in entry.provides
    assert entry.needs == ("solution",) and entry.title == registry.catalog()["icpo"]["title"]


def test_the_last_row_of_each_group_is_steered_and_trained_under_the_plain_prompt(engine):
    task, G = get_task("addition"), 4
    examples = task.sample(3, random.Random(0))
    spy = PromptSpy(engine)
    torch.manual_seed(0)
    batch = icpo_rollout(spy, task, examples, group_size=G, sampling=Sampling(6), ctx=None)
    assert batch.group.tolist() == [g for g in range(3) for _ in range(G)]
    steered = torch.zeros(3 * G, dtype=torch.bool)
    steered[G - 1::G] = True
    assert torch.equal(batch.offpolicy_mask[steered], batch.mask[steered]) and batch.offpolicy_mask[~steered].sum() == 0
    # what sampled them: the plain prompts (G - 1 each), then one prompt per example with a demonstration before it
    plain_prompts, steering = spy.prompts
    assert plain_prompts == [e.prompt for e in examples]
    for example, prompt in zip(examples, steering):
        demo, question = prompt.split("\n\n\n")
        assert question == f"Question: {example.prompt}\nAnswer:"
        assert prompt == ICL_TEMPLATE.format(hint=demo, prompt=example.prompt)
        assert demo.startswith("Question: ") and example.prompt not in demo  # another example, solved
        q, a = demo.removeprefix("Question: ").split("\nAnswer: ")
        x, y = q.rstrip("=").split("+")
        assert a == str(int(x) + int(y))  # the demonstration is solved (the task's exact solution)
    # catalog (3): the steered rows carry the plain prompt's ids, so the training forward never sees a demonstration
    for g in range(3):
        assert torch.equal(batch.prompt_ids[g * G + G - 1], batch.prompt_ids[g * G])
        assert batch.prompts[g * G + G - 1] == examples[g].prompt


def test_no_steered_sample_is_the_plain_rollout(engine):
    task = get_task("addition")
    examples = task.sample(2, random.Random(1))
    torch.manual_seed(3)
    batch = icpo_rollout(engine, task, examples, group_size=4, sampling=Sampling(6), n_off_policy=0)
    torch.manual_seed(3)
    plain = turns(engine, task, examples, group_size=4, sampling=Sampling(6))
    assert torch.equal(batch.response_ids, plain.response_ids) and batch.offpolicy_mask.sum() == 0
    greedy = icpo_rollout(engine, task, examples, group_size=4, sampling=Sampling(6, greedy=True))
    assert greedy.size == 8 and greedy.offpolicy_mask.sum() == 0  # evaluation and baselines are never steered


def test_a_demonstration_is_the_references_format():
    task = get_task("calculator")
    example = task.eval_set(1)[0]
    solution = "".join(task.expert_actions(example))
    assert demonstration(task, example) == f"Question: {example.prompt}\nAnswer: {solution}"


@pytest.mark.parametrize("override, match", [
    ({"rollout": {"n_off_policy": 4}}, r"n_off_policy=4 steered samples leave no on-policy sample in a group of 4"),
    ({"rollout": {"n_demo": 0}}, r"n_demo=0"), ({"reward_shaping": {"horizon": 0}}, r"horizon=0"),
])
def test_bad_settings_are_refused_before_training(tmp_path, override, match):
    with pytest.raises(ValueError, match=match):
        Trainer(make_config("smoke", recipe="icpo", **{**TINY, "recipe_overrides": override}), tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_the_recipe_trains_and_resumes_exactly(tmp_path):
    assert resumes_exactly(make_config("smoke", recipe="icpo", **TINY), tmp_path)
    rows = metric_rows(tmp_path / "straight")
    assert [r["icpo/bonus"] for r in rows] == [1 - s / 400 for s in range(len(rows))]
    assert all(0 < r["shaping/offpolicy_frac"] < 1 for r in rows)
