"""Preference data sources: items as teacher-forced rows best first, offline data built once, online labels."""
import random

import pytest
import torch

from workbench import registry
from workbench.context import StepContext
from workbench.models import build_tiny
from workbench.rollout.engine import HFEngine, Sampling
from workbench.rollout.preference_data import items_batch, win_rate
from workbench.tasks import get_task
from workbench.tasks.base import Example


@pytest.fixture(scope="module")
def engine():
    model, tok = build_tiny(seed=0)
    return HFEngine(model, tok)


def ctx(step=0, state=None, n=4):
    return StepContext(step=step, total_steps=4, seed=3, group_size=4, prompts_per_step=n, max_new_tokens=4,
                       state=state)


def test_items_become_one_group_each_with_their_responses_in_rank_order(engine):
    batch = items_batch(engine, ["1+1=", "2+2="], [["2", "3"], ["4", "44"]], ends=[[True, True], [True, False]],
                        labels={"preference_reward": [[1.0, 0.0], [1.0, 0.0]]})
    assert batch.group.tolist() == [0, 0, 1, 1] and batch.completions == ["2", "3", "4", "44"]
    assert batch.prompts == ["1+1=", "1+1=", "2+2=", "2+2="]
    assert batch.lengths.tolist() == [2, 2, 2, 2]  # "44" is a partial step: no EOS
    assert batch.rewards.tolist() == batch.preference_reward.tolist() == [1.0, 0.0, 1.0, 0.0]
    with pytest.raises(ValueError, match="same number of responses"):
        items_batch(engine, ["a", "b"], [["1", "2"], ["3"]])


def test_no_item_is_a_batch_of_no_rows(engine):
    batch = items_batch(engine, [], [], labels={"winrate": []})
    assert batch.size == 0 and batch.winrate.shape == (0,)


@pytest.mark.covers("dpo")
def test_offline_pairs_are_built_once_and_drawn_with_the_steps_seed(engine):
    source = registry.get("rollout", "task-pairs").fn
    task, state = get_task("addition"), {}
    sampling = Sampling(4)
    step = ctx(0, state)
    first = source(engine, task, [], group_size=4, sampling=sampling, ctx=step, pairs=16)
    assert step.metrics == {"pairs": 4.0}
    built = state["prompts"]
    again = source(engine, task, [], group_size=4, sampling=sampling, ctx=ctx(0, state), pairs=16)
    assert state["prompts"] is built and len(built) == 16  # kept, not rebuilt
    assert first.prompts == again.prompts and first.size == 8
    picked = random.Random("3-0").sample(range(16), 4)  # (seed, step), as the run always drew them
    assert first.prompts[::2] == [built[i] for i in picked]
    assert first.preference_reward.tolist() == [1.0, 0.0] * 4
    other = source(engine, task, [], group_size=4, sampling=sampling, ctx=ctx(1, state), pairs=16)
    assert other.prompts != first.prompts


def test_an_offline_source_refuses_to_run_without_its_state(engine):
    source = registry.get("rollout", "task-pairs").fn
    with pytest.raises(ValueError, match="keeps its dataset as pipeline state"):
        source(engine, get_task("addition"), [], group_size=4, sampling=Sampling(4), ctx=None)
    assert registry.get("rollout", "task-pairs").defaults == {"pairs": 512}


def test_file_pairs_needs_a_path(engine):
    source = registry.get("rollout", "file-pairs").fn
    with pytest.raises(ValueError, match="--set data_path=PATH"):
        source(engine, get_task("addition"), [], group_size=4, sampling=Sampling(4), ctx=ctx(0, {}))


@pytest.mark.covers("spo-prefdeg")
def test_degraded_pairs_put_the_copies_between_chosen_and_rejected(engine):
    source = registry.get("rollout", "degraded-pairs").fn
    batch = source(engine, get_task("addition"), [], group_size=4, sampling=Sampling(4), ctx=ctx(0, {}, n=2),
                   pairs=8)
    assert batch.size == 8 and batch.group.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert all(len(batch.completions[i]) >= len(batch.completions[i + 1]) for i in (0, 1, 4, 5))


@pytest.mark.covers("online-dpo", "sppo")
def test_sampled_pairs_label_the_best_and_worst_sample_with_rewards_and_win_rates(engine):
    task = get_task("addition")
    examples = task.sample(6, random.Random(0))
    torch.manual_seed(0)
    step = ctx()
    batch = registry.get("rollout", "sampled-pairs").fn(engine, task, examples, group_size=4,
                                                         sampling=Sampling(4, temperature=1.5), ctx=step)
    assert step.metrics["pairs"] == batch.size // 2  # the items it delivers
    assert batch.size % 2 == 0 and batch.winrate.shape == batch.preference_reward.shape == (batch.size,)
    for i in range(0, batch.size, 2):
        assert batch.preference_reward[i] >= batch.preference_reward[i + 1]
        assert batch.winrate[i] >= batch.winrate[i + 1]


def test_win_rate_from_verifier_scores():
    task = get_task("addition")
    example = Example("1+1=", "2", "2")
    assert win_rate(task, example, "2", ["2", "3", "4", "2"]) == pytest.approx((0.5 + 1 + 1 + 0.5) / 4)
    assert win_rate(task, example, "5", ["2", "3"]) == pytest.approx(0.25)


@pytest.mark.parametrize("use_kw,match", [
    ({"pairs": 0}, r"pairs=0 \(an int >= 1\)"), ({"pairs": "many"}, "pairs='many'"),
    ({"list_size": 1}, r"list_size=1 \(an int >= 2\)"), ({"step_chars": 0}, "step_chars=0"),
    ({"path": "no/such.jsonl"}, "does not exist"), ({"fractions": (0.5, 1.0)}, r"must each lie in \(0, 1\)")])
def test_impossible_data_parameters_are_refused_when_the_recipe_is_checked(use_kw, match, tmp_path):
    from workbench.recipes import get_recipe, use
    from workbench.train.pipeline import Pipeline
    import dataclasses

    key = {"path": "file-pairs", "fractions": "degraded-pairs", "list_size": "task-lists",
           "step_chars": "advantage-steps"}.get(next(iter(use_kw)), "task-pairs")
    recipe = dataclasses.replace(get_recipe("dpo"), rollout=use(key, **use_kw))
    with pytest.raises(ValueError, match=match):
        Pipeline(recipe)


def test_a_missing_data_path_is_refused_before_a_run_folder_is_written(tmp_path):
    from workbench.train import Trainer, make_config

    with pytest.raises(ValueError, match="does not exist"):
        Trainer(make_config("smoke", recipe="dpo", task="addition", data_path=str(tmp_path / "x.jsonl")), tmp_path / "r")
    assert not (tmp_path / "r").exists()
