"""DART's adaptive rollout count: n(p_hat) non-increasing in the prompt's success rate, the rollout sampling that many
rows per prompt in the step's prompt order, the success rates it keeps, and its refusals."""
import random

import pytest
import torch

from tests.helpers import group_batch, step_context
from workbench import registry
from workbench.rollout import Sampling, turns
from workbench.rollout.dart import check_dart_rollout, dart_rollout, observe_successes, rollout_count, success_rate
from workbench.tasks import get_task
from workbench.train.pipeline import Pipeline
from workbench.recipes import Recipe, use

pytestmark = pytest.mark.covers("dart")


def test_the_count_is_non_increasing_in_the_success_rate():
    """Catalog test (3), on a fine grid and for several (n_min, n_max)."""
    for n_min, n_max in ((2, 8), (2, 4), (3, 16), (2, 2)):
        counts = [rollout_count(p / 200, n_min=n_min, n_max=n_max) for p in range(201)]
        assert all(a >= b for a, b in zip(counts, counts[1:]))
        assert counts[0] == n_max and counts[-1] == n_min and set(counts) <= set(range(n_min, n_max + 1))


def test_the_count_is_n_max_below_low_and_unseen_n_min_above_high_and_linear_between():
    assert rollout_count(None, n_min=2, n_max=8) == 8
    assert rollout_count(0.19, n_min=2, n_max=8) == 8 and rollout_count(0.2, n_min=2, n_max=8) == 8
    assert rollout_count(0.81, n_min=2, n_max=8) == 2 and rollout_count(0.8, n_min=2, n_max=8) == 2
    assert rollout_count(0.5, n_min=2, n_max=8) == 5       # 8 - 6 x 0.5 by hand
    assert rollout_count(0.3, n_min=2, n_max=8) == 7       # 8 - 6 x (0.1 / 0.6) = 7
    assert rollout_count(0.5, n_min=2, n_max=8, low=0.0, high=1.0) == 5


def test_success_rates_are_successes_over_attempts_over_all_visits():
    state, ctx = {"rates": {}}, step_context()
    b = group_batch([1.0, 0.0, 0.0, 0.0, 1.0, 1.0], [0, 0, 0, 0, 1, 1])
    b.scores, b.prompts = b.rewards.clone(), ["q"] * 4 + ["r"] * 2
    state = observe_successes(state, b, ctx)
    assert success_rate(state, "q") == pytest.approx(0.25) and success_rate(state, "r") == 1.0
    b2 = group_batch([1.0, 1.0], [0, 0])
    b2.scores, b2.prompts = b2.rewards.clone(), ["q", "q"]
    state = observe_successes(state, b2, ctx)
    assert success_rate(state, "q") == pytest.approx(3 / 6) and success_rate(state, "new") is None


def test_the_rollout_samples_n_of_p_hat_rows_per_prompt_in_prompt_order(engine):
    task = get_task("addition")
    examples = task.sample(3, random.Random(0))
    state = {"rates": {str(examples[0].prompt): [9.0, 10], str(examples[2].prompt): [1.0, 2]}}  # 0.9, -, 0.5
    ctx = step_context(state=state)
    torch.manual_seed(0)
    batch = dart_rollout(engine, task, examples, group_size=6, sampling=Sampling(4), ctx=ctx)
    sizes = torch.bincount(batch.group).tolist()
    assert sizes == [2, 6, rollout_count(0.5, n_min=2, n_max=6)] == [2, 6, 4]
    assert batch.group.tolist() == sorted(batch.group.tolist())  # rows of a prompt together, in prompt order
    for i, g in enumerate(batch.group.tolist()):
        assert batch.prompts[i] == str(examples[g].prompt)
    assert batch.mu_logp is not None and batch.mu_logp.shape == batch.mask.shape
    assert ctx.metrics["dart/rollouts_per_prompt"] == pytest.approx(12 / 3) and ctx.metrics["dart/known_prompts"] == 2


def test_without_state_or_greedy_it_is_the_plain_rollout(engine):
    task = get_task("addition")
    examples = task.sample(2, random.Random(1))
    torch.manual_seed(3)
    plain = turns(engine, task, examples, group_size=3, sampling=Sampling(4))
    torch.manual_seed(3)
    ours = dart_rollout(engine, task, examples, group_size=3, sampling=Sampling(4))
    assert torch.equal(plain.response_ids, ours.response_ids) and torch.equal(plain.group, ours.group)


@pytest.mark.parametrize("kw, match", [
    ({"n_min": 1}, "n_min=1"), ({"n_min": 2.5}, "n_min=2.5"), ({"low": 0.8, "high": 0.2}, "low=0.8, high=0.2"),
    ({"high": 1.5}, "high=1.5"), ({"n_min": 5, "group_size": 4}, "n_min=5 is more than group_size=4"),
])
def test_bad_settings_are_refused_naming_the_parameter(kw, match):
    with pytest.raises(ValueError, match=match):
        check_dart_rollout(**kw)


def test_the_pipeline_refuses_n_min_above_the_group_size_before_training():
    pipeline = Pipeline(Recipe(key="t", title="t", summary="t", rollout=use("dart", n_min=6), advantage=["grpo"]))
    with pytest.raises(ValueError, match="n_min=6 is more than group_size=4"):
        pipeline.check_group_size(4)
    assert registry.get("rollout", "dart").defaults == {"n_min": 2, "low": 0.2, "high": 0.8}
